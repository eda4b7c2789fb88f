"""The program the harness runs as a Pydantic AI + DBOS agent: the user's agent, unmodified, under probes.

    python -m crashmatrix.integrations.pydantic_ai_dbos.host [--app MODULE:ATTR] [--path DIR]...
        run SESSION WORKSPACE PROVIDER_URL TASK
    python -m crashmatrix.integrations.pydantic_ai_dbos.host [--app MODULE:ATTR] [--path DIR]...
        recover SESSION WORKSPACE PROVIDER_URL
    python -m crashmatrix.integrations.pydantic_ai_dbos.host [--app MODULE:ATTR] [--path DIR]... describe

`--app` names the user's `DBOSAgent` (`--path` directories are put first on `sys.path` to find
it), or a function returning one. Importing the app registers its workflow and steps with DBOS,
as it does in the user's service; the app must not construct or launch `DBOS` itself at import
(a DBOS instance it made is replaced, its registrations kept): the host constructs it, as a
service's `main` does, with a SQLite system database in the session directory
(`SESSION/dbos.sqlite`), no conductor, no OTLP export, then calls `DBOS.launch()`.

`run` runs `await agent.run(TASK)` (the agent's DBOS workflow) under the workflow id
`store.WORKFLOW_ID`. `recover` is DBOS's documented recovery: `DBOS.launch()` finds the pending
workflow of this executor and application version and runs it again from its start, replaying
recorded steps from their outputs; the host waits for that workflow's result. A workflow that
already finished is not run again (DBOS finds nothing pending); its result is read and the host
exits 0.

The agent runs with the workspace as its current directory, a placeholder API key and
`OPENAI_BASE_URL` pointing at the provider: a hosted run must reach nothing but the harness's
fake provider (QUIET_ENV turns off what could call out).

`describe` loads the agent as `run` does, in a scratch directory and with `OPENAI_BASE_URL` at an
address where nothing listens, without DBOS, and prints its tools (`tools.agent_tools`) as one
line of JSON: `{"tools": [{"name", "parameters", "description"}, ...]}`.

Exit codes: 0 the workflow succeeded (describe: the tools were printed), 1 it failed (or recover
found no workflow in the session; describe: the app did not load), 2 usage, 3 the harness closed
the probe channel.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID
from pydantic_ai._warnings import PydanticAIDeprecationWarning
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.models.wrapper import WrapperModel

from crashmatrix.integrations.hosting import Commits, describe, host_args, host_parser, import_app, serialised
from crashmatrix.integrations.pydantic_ai_dbos import seams, store
from crashmatrix.integrations.pydantic_ai_dbos.settings import APP_ENV, DEFAULT_APP, QUIET_ENV
from crashmatrix.integrations.pydantic_ai_dbos.tools import agent_tools

APP_NAME = "crashmatrix"  # DBOS's application name (it names nothing the agent reads)
POLL_S = 0.02  # how often the host looks for the recovered workflow's result


def _parser() -> argparse.ArgumentParser:
    return host_parser("crashmatrix.integrations.pydantic_ai_dbos.host", APP_ENV, DEFAULT_APP)


def load_agent(ref: str, paths: list[str]) -> Any:
    """The agent `MODULE:ATTR` names (a Pydantic AI agent, e.g. a `DBOSAgent`, or a function
    returning one), importing MODULE with `paths` first on sys.path."""
    # `DBOSAgent` is deprecated in favour of the `DBOSDurability` capability; a user's app may
    # still use it (the example does), and the warning would be printed by every incarnation.
    warnings.filterwarnings("ignore", category=PydanticAIDeprecationWarning)
    found = import_app(ref, paths, "mypkg.agent:agent")
    agent = found if isinstance(found, AbstractAgent) else found() if callable(found) else None
    if not isinstance(agent, AbstractAgent):
        raise ValueError(f"--app {ref!r}: {ref.partition(':')[2]} is neither a Pydantic AI agent "
                         "nor a function returning one")
    return agent


def agent_models(agent: Any) -> list[Any]:
    """The model instance the agent's requests reach: inside DBOS's model step, the one
    `DBOSModel` wraps."""
    model = getattr(agent, "model", None)
    while isinstance(model, WrapperModel):  # DBOSModel is one
        model = model.wrapped
    return [model] if model is not None and not isinstance(model, str) else []


def dbos_config(session: Path) -> DBOSConfig:
    """DBOS as a service would run it on one machine, its system database in the session."""
    return {
        "name": APP_NAME,
        "system_database_url": f"sqlite:///{session / store.DB}",
        "enable_otlp": False,
        "log_level": "WARNING",
        # One connection: the workflow's commits and DBOS's background polling take turns on it
        # in the process, rather than contending for SQLite's file lock from several
        # connections (each transaction begins IMMEDIATE, taking that lock).
        "sys_db_pool_size": 1,
    }


def start_dbos(session: Path) -> None:
    """Construct DBOS for this session (replacing one the app made) and launch it: a pending
    workflow is recovered from here."""
    import dbos._dbos as dbos_module  # noqa: PLC0415 - its global instance, read once

    if dbos_module._dbos_global_instance is not None:  # the app's import made one
        DBOS.destroy(destroy_registry=False)
    DBOS(config=dbos_config(session))
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS.launch()


def main(argv: list[str] | None = None) -> int:
    args = host_args(_parser(), argv, QUIET_ENV)
    if isinstance(args, int):
        return args
    if args.command == "describe":
        paths = [*args.path, os.getcwd()]
        return describe(lambda: agent_tools(load_agent(args.app, paths)))
    session, workspace = args.session, args.workspace
    existing = _existing(session)
    if isinstance(existing, str):
        print(f"{args.command}: {existing}", file=sys.stderr)
        return 1
    if args.command == "recover" and not existing:
        print(f"recover: {session} holds no workflow (no run was started)", file=sys.stderr)
        return 1
    try:
        seams.wrap_system_database(Commits(c.key for c in existing))
        paths = [*args.path, os.getcwd()]
        os.chdir(workspace)  # the user's tools act on the current directory
        agent = load_agent(args.app, paths)
        seams.install(agent, agent_models)
        start_dbos(session)
        if args.command == "run":
            with SetWorkflowID(store.WORKFLOW_ID):
                asyncio.run(agent.run(args.task))
        else:
            DBOS.retrieve_workflow(store.WORKFLOW_ID).get_result(polling_interval_sec=POLL_S)
            # The outcome is in the database once its write returned, but its commit's last
            # events come after: the seams hold the probe lock across the write and its events,
            # so taking it here waits for them (the recovered workflow runs on DBOS's thread).
            with serialised():
                pass
    except Exception:
        traceback.print_exc()
        return 1
    return 0


def _existing(session: Path) -> list[store.Commit] | str:
    """The session's commits before DBOS opens its database (or what is wrong with it)."""
    rows = store.read_rows(session)
    return rows if isinstance(rows, str) else rows.commits


def exit_now(code: int) -> None:
    """End the process without stopping DBOS: `DBOS.destroy()` joins its polling threads (about
    0.9 s an incarnation); they are daemons holding nothing the run needs, and SQLite keeps a
    write they are in the middle of whole or not at all (as a crash would). Forked incarnations
    end so too (the zygote's child calls `os._exit`)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
