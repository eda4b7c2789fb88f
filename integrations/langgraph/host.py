"""The program the harness runs as a LangGraph agent: the user's graph, unmodified, under probes.

    python -m crashmatrix.integrations.langgraph.host [--app MODULE:ATTR] [--path DIR]...
        run SESSION WORKSPACE PROVIDER_URL TASK
    python -m crashmatrix.integrations.langgraph.host [--app MODULE:ATTR] [--path DIR]...
        recover SESSION WORKSPACE PROVIDER_URL
    python -m crashmatrix.integrations.langgraph.host [--app MODULE:ATTR] [--path DIR]... describe

`--app` names the user's graph factory (`--path` directories are put first on `sys.path` to find
it). The factory is called with the checkpointer if it takes an argument, else with none; it
returns a compiled graph (its checkpointer is replaced by the session's) or a `StateGraph` (the
host compiles it). The checkpointer is a `SqliteSaver` on `SESSION/checkpoints.sqlite`; the
thread id is kept in `SESSION/thread_id`. `run` invokes the graph with the task as a user
message; `recover` invokes it with `None` on the same thread, which is how LangGraph documents
resuming after a failure. Both use `durability="sync"` (each step saved before the next starts).
The graph runs with the workspace as its current directory and `OPENAI_BASE_URL` pointing at
the provider, tracing to LangSmith off and a placeholder API key (a hosted run must reach
nothing but the harness's fake provider).

`describe` loads and builds the app as `run` does, but with an in-memory checkpointer, in a
scratch directory and with `OPENAI_BASE_URL` at an address where nothing listens, and prints
its tools (`tools.graph_tools`) as one line of JSON: `{"tools": [{"name", "parameters",
"description"}, ...]}`. The adapter runs it before a run, to know the tools and to report an app
that does not load.

Exit codes: 0 the invocation returned (describe: the tools were printed), 1 it raised (the run
failed; describe: the app did not load), 2 usage, 3 the harness closed the probe channel.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sqlite3
import sys
import traceback
import uuid
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from crashmatrix.integrations.hosting import Commits, describe, host_args, host_parser, import_app
from crashmatrix.integrations.langgraph import seams, store
from crashmatrix.integrations.langgraph.settings import APP_ENV, DEFAULT_APP, QUIET_ENV
from crashmatrix.integrations.langgraph.tools import graph_tools


def _parser() -> argparse.ArgumentParser:
    return host_parser("crashmatrix.integrations.langgraph.host", APP_ENV, DEFAULT_APP)


def load_factory(ref: str, paths: list[str]) -> Any:
    """The callable `MODULE:ATTR` names, importing MODULE with `paths` first on sys.path."""
    factory = import_app(ref, paths, "mypkg.graph:build")
    if not callable(factory):
        raise ValueError(f"--app {ref!r}: {ref.partition(':')[2]} is not callable")
    return factory


def build_graph(factory: Any, saver: BaseCheckpointSaver[Any]) -> Any:
    """The user's graph, compiled with (or given) the session's checkpointer."""
    try:
        takes_arg = bool(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        takes_arg = False
    graph = factory(saver) if takes_arg else factory()
    if not hasattr(graph, "invoke") and hasattr(graph, "compile"):
        return graph.compile(checkpointer=saver)  # an uncompiled StateGraph
    if getattr(graph, "checkpointer", None) is not saver:
        graph = graph.copy(update={"checkpointer": saver})
    return graph


def thread_id(session: Path, command: str) -> str | None:
    """The session's thread: made (and saved before anything else) by the first `run`."""
    existing = store.read_thread_id(session)
    if existing is not None or command != "run":
        return existing
    made = f"thread-{uuid.uuid4().hex}"
    tmp = session / f"{store.THREAD_FILE}.tmp"
    tmp.write_text(made + "\n", encoding="utf-8")
    tmp.replace(session / store.THREAD_FILE)
    return made


def describe_app(ref: str, paths: list[str]) -> int:
    """The `describe` command: the app's tools as JSON on stdout (exit 1 if it does not load).
    No session: the checkpointer is in memory, so building the graph writes nothing."""
    return describe(lambda: graph_tools(build_graph(load_factory(ref, paths), InMemorySaver())))


def main(argv: list[str] | None = None) -> int:
    args = host_args(_parser(), argv, QUIET_ENV)
    if isinstance(args, int):
        return args
    if args.command == "describe":
        return describe_app(args.app, [*args.path, os.getcwd()])
    session, workspace = args.session, args.workspace
    tid = thread_id(session, args.command)
    if tid is None:
        print(f"recover: {session} holds no thread (no run was started)", file=sys.stderr)
        return 1
    conn = sqlite3.connect(session / store.DB, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        seams.wrap_saver(saver, Commits(c.key for c in store.commits(conn, tid)))
        seams.install_handler()
        paths = [*args.path, os.getcwd()]
        os.chdir(workspace)  # the user's tools act on the current directory
        graph = build_graph(load_factory(args.app, paths), saver)
        # One worker: LangGraph submits its store writes to a thread pool, where a task's writes
        # and the next checkpoint could start in either order; with one worker they run in the
        # order LangGraph submits them, so every run of a case emits the same events.
        config: dict[str, Any] = {"configurable": {"thread_id": tid}, "max_concurrency": 1}
        task = {"messages": [{"role": "user", "content": args.task}]} if args.command == "run" else None
        graph.invoke(task, config, durability="sync")
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
