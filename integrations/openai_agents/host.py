"""The program the harness runs as an Agents SDK agent: the user's agent, unmodified, under probes.

    python -m crashmatrix.integrations.openai_agents.host [--app MODULE:ATTR] [--path DIR]...
        run SESSION WORKSPACE PROVIDER_URL TASK
    python -m crashmatrix.integrations.openai_agents.host [--app MODULE:ATTR] [--path DIR]...
        recover SESSION WORKSPACE PROVIDER_URL
    python -m crashmatrix.integrations.openai_agents.host [--app MODULE:ATTR] [--path DIR]... describe

`--app` names the user's agent factory (`--path` directories are put first on `sys.path` to find
it): a callable returning an `Agent`, or an `Agent` itself. The agent runs as an SDK user runs
one: `Runner.run_sync(agent, input, session=SQLiteSession(id, SESSION/session.sqlite))`.

What "recover" means for an SDK app. The SDK has no resume-after-crash: a `SQLiteSession` is a
conversation history, and nothing in it says that a run was interrupted. What a service built on
it does after a crash is deliver the request it had not answered again: the caller, a queue's
redelivery or a supervisor's restart, runs the agent again with the same input on the same
session, as the SDK documents continuing a conversation. So `recover` reads the session: if
its newest input already has its final answer (the last item is an assistant message), the
request was answered and there is nothing to do (exit 0: a finished session stays finished);
otherwise it runs the agent again with that input's text. The SDK then adds the input to the
session a second time and sends the whole history; a tool whose effect landed but whose output
was not saved is run again when the model asks again (measured with 0.24.0, issue 15). Another
restart (running with an empty input, to continue from the history as it stands) would not
re-send the input, but the model would still not see the lost tool output and ask again.

Each hosted run has tracing off (`set_tracing_disabled`, no trace processors, and
`OPENAI_AGENTS_DISABLE_TRACING`: the SDK exports traces to OpenAI's servers by default), a
placeholder API key and `OPENAI_BASE_URL` pointing at the provider: a hosted run must reach
nothing but the harness's fake provider. The agent runs with the workspace as its current
directory.

`describe` loads the agent as `run` does, in a scratch directory and with `OPENAI_BASE_URL` at an
address where nothing listens, and prints its tools (`tools.agent_tools`) as one line of JSON:
`{"tools": [{"name", "parameters", "description"}, ...]}`. The adapter runs it before a run, to
know the tools and to report an app that does not load.

Exit codes: 0 the run returned (or recover found nothing to do; describe: the tools were printed),
1 it raised (the run failed; describe: the app did not load), or recover found no input in the
session, 2 usage, 3 the harness closed the probe channel.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import traceback
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from agents import Agent, RunConfig, Runner, SQLiteSession, set_trace_processors, set_tracing_disabled
from agents.models.multi_provider import MultiProvider

from crashmatrix.integrations.hosting import describe, host_args, host_parser, import_app
from crashmatrix.integrations.openai_agents import seams, store
from crashmatrix.integrations.openai_agents.settings import APP_ENV, DEFAULT_APP, QUIET_ENV
from crashmatrix.integrations.openai_agents.tools import agent_tools

T = TypeVar("T")
P = ParamSpec("P")


def _parser() -> argparse.ArgumentParser:
    return host_parser("crashmatrix.integrations.openai_agents.host", APP_ENV, DEFAULT_APP)


def load_agent(ref: str, paths: list[str]) -> Agent[Any]:
    """The agent `MODULE:ATTR` names (a factory, called with no arguments, or an Agent),
    importing MODULE with `paths` first on sys.path."""
    found = import_app(ref, paths, "mypkg.agent:build")
    agent = found if isinstance(found, Agent) else found() if callable(found) else None
    if not isinstance(agent, Agent):
        raise ValueError(f"--app {ref!r}: {ref.partition(':')[2]} is neither an Agent nor a factory "
                         "returning one")
    return agent


class InlineExecutor(ThreadPoolExecutor):
    """Runs what the SDK hands to a worker thread (`asyncio.to_thread`) on the calling thread
    (a ThreadPoolExecutor only because asyncio accepts no other default; it starts no thread)."""

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to the awaiting task, as a worker's would be
            done.set_exception(exc)
        return done


def inline_loop() -> None:
    """Give `Runner.run_sync` (it runs on this thread's default loop) a loop whose executor runs
    everything on the loop's own thread. `SQLiteSession` runs its SQL with `asyncio.to_thread`,
    one connection per thread: on a pool, which threads (so connections, so writes to the -shm
    file) a run uses depends on timing, and strace counts an injection's calls per thread, so
    black-box crash points (the n-th write of a store file) would land on other calls from run
    to run. On one thread the store's system calls are the same in every run. The cost: a sync
    tool blocks the loop while it runs (parallel sync tools run one at a time), which a
    single-agent run, awaiting its tools anyway, does not notice."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(InlineExecutor())
    asyncio.set_event_loop(loop)


def quiet() -> None:
    """No trace leaves the process: the SDK's exporter would send them to OpenAI's servers (the
    environment, QUIET_ENV, is set by `host_args`)."""
    set_tracing_disabled(True)
    set_trace_processors([])


def main(argv: list[str] | None = None) -> int:
    args = host_args(_parser(), argv, QUIET_ENV)
    if isinstance(args, int):
        return args
    quiet()
    if args.command == "describe":
        paths = [*args.path, os.getcwd()]
        return describe(lambda: agent_tools(load_agent(args.app, paths)))
    session_dir, workspace = args.session, args.workspace
    existing = store.read_items(session_dir)
    task: str | None = args.task
    if args.command == "recover":
        if not any(store.is_input(i) for i in existing.items):
            print(f"recover: {session_dir} holds no input (no run was started)", file=sys.stderr)
            return 1
        task = store.pending_input(existing.items)
        if task is None:
            return 0  # the newest input was answered: a restart has nothing to deliver again
    session = SQLiteSession(store.SESSION_ID, session_dir / store.DB)
    try:
        seams.wrap_session(session, seams.Commits(existing.items))
        paths = [*args.path, os.getcwd()]
        os.chdir(workspace)  # the user's tools act on the current directory
        agent = load_agent(args.app, paths)
        seams.probe_agent_models(agent)
        config = RunConfig(model_provider=seams.ProbedProvider(MultiProvider()), tracing_disabled=True)
        inline_loop()
        Runner.run_sync(agent, task or "", session=session, hooks=seams.ProbeHooks(), run_config=config)
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
