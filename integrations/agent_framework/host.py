"""The program the harness runs as an Agent Framework agent: the user's workflow, unmodified, under probes.

    python -m crashmatrix.integrations.agent_framework.host [--app MODULE:ATTR] [--path DIR]...
        run SESSION WORKSPACE PROVIDER_URL TASK
    python -m crashmatrix.integrations.agent_framework.host [--app MODULE:ATTR] [--path DIR]...
        recover SESSION WORKSPACE PROVIDER_URL
    python -m crashmatrix.integrations.agent_framework.host [--app MODULE:ATTR] [--path DIR]... describe

`--app` names the user's workflow factory (`--path` directories are put first on `sys.path` to
find it): called with the checkpoint storage if it takes an argument, else with none, it returns
a `Workflow` (or a `WorkflowBuilder`, which the host builds) whose start executor is an agent.
The checkpoints are a `FileCheckpointStorage` on `SESSION/checkpoints/`, given to the workflow as
its run's storage (`workflow.run(..., checkpoint_storage=...)`, which takes precedence over one
the app built in). `run` is `workflow.run(TASK)`; `recover` is what Agent Framework documents
for resuming: the latest checkpoint of the workflow (`storage.get_latest(workflow_name=...)`)
and `workflow.run(checkpoint_id=...)`. A workflow checkpoints at the end of each superstep (and
once before the first, holding the input); an agent's whole turn, every model call and tool
call in it, is one superstep, so a resume starts that turn again from its input.

The workflow runs with the workspace as its current directory, `OPENAI_BASE_URL` pointing at the
provider, a placeholder API key and OpenTelemetry off (a hosted run must reach nothing but the
harness's fake provider), on an event loop that runs what the framework hands to worker threads
on its own thread (`inline_loop`).

`describe` loads and builds the app as `run` does, with in-memory checkpoints, in a scratch
directory and with `OPENAI_BASE_URL` at an address where nothing listens, and prints its tools
(`tools.workflow_tools`) as one line of JSON: `{"tools": [{"name", "parameters", "description"},
...]}`.

Exit codes: 0 the workflow ran to its end (or recover found nothing to resume; describe: the
tools were printed), 1 it raised (describe: the app did not load), 2 usage, 3 the harness closed
the probe channel.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from agent_framework import (
    CheckpointStorage,
    FileCheckpointStorage,
    InMemoryCheckpointStorage,
    Workflow,
    WorkflowBuilder,
)

from crashmatrix.integrations.agent_framework import seams, store
from crashmatrix.integrations.agent_framework.settings import APP_ENV, DEFAULT_APP, QUIET_ENV
from crashmatrix.integrations.agent_framework.tools import workflow_tools
from crashmatrix.integrations.hosting import Commits, describe, host_args, host_parser, import_app

T = TypeVar("T")
P = ParamSpec("P")


def _parser() -> argparse.ArgumentParser:
    return host_parser("crashmatrix.integrations.agent_framework.host", APP_ENV, DEFAULT_APP)


def load_factory(ref: str, paths: list[str]) -> Any:
    """What `MODULE:ATTR` names (a factory, or a Workflow), importing MODULE with `paths` first."""
    found = import_app(ref, paths, "mypkg.workflow:build")
    if not isinstance(found, Workflow) and not callable(found):
        raise ValueError(f"--app {ref!r}: {ref.partition(':')[2]} is neither a Workflow nor a factory")
    return found


def build_workflow(found: Any, storage: CheckpointStorage) -> Workflow:
    """The user's workflow, built with the session's storage when its factory takes one."""
    if isinstance(found, Workflow):
        return found
    try:
        takes_arg = bool(inspect.signature(found).parameters)
    except (TypeError, ValueError):
        takes_arg = False
    built = found(storage) if takes_arg else found()
    if isinstance(built, WorkflowBuilder):
        built = built.build()
    if not isinstance(built, Workflow):
        raise ValueError(f"the factory returned {type(built).__name__}, not a Workflow")
    return built


class InlineExecutor(ThreadPoolExecutor):
    """Runs what the framework hands to a worker thread (`asyncio.to_thread`, `run_in_executor`)
    on the calling thread (a ThreadPoolExecutor only because asyncio accepts no other default;
    it starts no thread)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the awaiting task, as a worker's would be
            done.set_exception(exc)
        return done


def inline_loop() -> asyncio.AbstractEventLoop:
    """A loop whose default executor runs everything on the loop's own thread. The framework
    runs sync tools with `asyncio.to_thread` and writes checkpoint files with
    `run_in_executor`: on a pool, which thread does what depends on timing, and strace counts
    an injection's calls per thread, so black-box crash points would move from run to run. The
    cost: a sync tool blocks the loop while it runs, which one agent awaiting its tools does not
    notice."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(InlineExecutor())
    asyncio.set_event_loop(loop)
    return loop


async def latest_checkpoint_id(storage: CheckpointStorage, workflow: Workflow) -> str | None:
    """The workflow's latest checkpoint, as Agent Framework finds it (`get_latest` by name)."""
    latest = await storage.get_latest(workflow_name=workflow.name)
    return None if latest is None else latest.checkpoint_id


async def drive(command: str, workflow: Workflow, storage: CheckpointStorage, task: str | None) -> int:
    if command == "run":
        await workflow.run(task, checkpoint_storage=storage)
        return 0
    checkpoint_id = await latest_checkpoint_id(storage, workflow)
    if checkpoint_id is None:
        # No checkpoint holds the input: nothing was accepted, so nothing can be resumed (a
        # workflow whose name changes per build, WorkflowBuilder's default, finds none either).
        print(f"recover: no checkpoint of workflow {workflow.name!r} (nothing to resume)", file=sys.stderr)
        return 0
    await workflow.run(checkpoint_id=checkpoint_id, checkpoint_storage=storage)
    return 0


def describe_app(ref: str, paths: list[str]) -> int:
    """The `describe` command: the app's tools as JSON on stdout (exit 1 if it does not load).
    No session: the checkpoints are in memory, so building the workflow writes nothing."""
    return describe(lambda: workflow_tools(build_workflow(load_factory(ref, paths),
                                                          InMemoryCheckpointStorage())))


def main(argv: list[str] | None = None) -> int:
    args = host_args(_parser(), argv, QUIET_ENV)
    if isinstance(args, int):
        return args
    paths = [*args.path, os.getcwd()]
    if args.command == "describe":
        return describe_app(args.app, paths)
    session: Path = args.session
    directory = session / store.CHECKPOINTS
    storage = seams.ProbedStorage(FileCheckpointStorage(directory), Commits(store.commit_ids(session)))
    loop = inline_loop()
    try:
        os.chdir(args.workspace)  # the user's tools act on the current directory
        workflow = build_workflow(load_factory(args.app, paths), storage)
        seams.probe_workflow(workflow)
        return loop.run_until_complete(drive(args.command, workflow, storage, args.task))
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        loop.close()


if __name__ == "__main__":
    sys.exit(main())
