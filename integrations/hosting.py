"""What every framework integration shares: the hosted-app adapter, the host's command line, probes.

An integration hosts a user's app on a framework (`--agent NAME`, or `--agent NAME:MODULE:ATTR`
for the user's own): a host program the harness starts, with the app named on its command line,
and an adapter that knows which host, which app and where to find it. Probes come from the
framework's threads, so they go through one lock. The host's `describe` command loads the app
and prints its tools; the adapter runs it once before a run (`declared_tools`), which is also
how an app that does not load is reported as such, before any case. Nothing here imports a
framework.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from crashmatrix.harness.adapters.interface import (
    LaunchSpec,
    PreflightError,
    PythonEntry,
    ToolSpec,
    forked_command,
    pass_env_of,
)
from crashmatrix.harness.records.agent_env import agent_environment
from crashmatrix.probe import ProbeDetached, probe

DETACHED_EXIT = 3  # the harness closed the channel: take no further step
# `describe` runs with no provider: the app's client is built against an address where nothing
# listens (port 9, discard), so an app that calls its model while being built fails at once
# instead of reaching a vendor.
DESCRIBE_BASE_URL = "http://127.0.0.1:9/v1"
DESCRIBE_TIMEOUT_S = 120.0  # importing a framework and building an app; minutes means a hang
STDERR_TAIL = 40  # lines of a failed describe's stderr a PreflightError quotes
# Re-entrant: a commit holds it across its three events; probes come from several threads.
_probe_lock = threading.RLock()


def emit(kind: str, label: str, **detail: Any) -> None:
    """One probe event, serialised across threads; exits the process if the harness is gone."""
    with _probe_lock:
        try:
            probe(kind, label, **detail)
        except ProbeDetached:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os._exit(DETACHED_EXIT)


@contextmanager
def serialised() -> Iterator[None]:
    """Hold the probe lock across several events (a store write's before, written and after)."""
    with _probe_lock:
        yield


class Commits:
    """The seq of each store write, as a host's commit probes report it: the commits the store
    held when the process started (their keys, in store order), then each new key in the order
    its write happens; a write to a key already held keeps its seq. `commit` is one write's
    three events around it, under the probe lock."""

    def __init__(self, existing: Iterable[Hashable]) -> None:
        self._keys = {key: k for k, key in enumerate(existing, 1)}

    def known(self, key: Hashable) -> bool:
        return key in self._keys

    def seq(self, key: Hashable) -> int:
        if key not in self._keys:
            self._keys[key] = len(self._keys) + 1
        return self._keys[key]

    @contextmanager
    def commit(self, key: Hashable, label: str) -> Iterator[None]:
        with serialised():
            seq = self.seq(key)
            emit("commit.before", label, seq=seq)
            yield  # the write; an exception skips the events after it (it never landed)
            emit("commit.written", label, seq=seq)
            emit("commit.after", label, seq=seq)


def host_parser(prog: str, app_env: str, default_app: str) -> argparse.ArgumentParser:
    """`[--app MODULE:ATTR] [--path DIR]... run|recover SESSION WORKSPACE PROVIDER_URL [TASK]`,
    or `[--app MODULE:ATTR] [--path DIR]... describe`."""
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--app", default=os.environ.get(app_env) or default_app)
    p.add_argument("--path", action="append", default=[])
    commands = p.add_subparsers(dest="command", required=True)
    for name, doc in (("run", "start the task"), ("recover", "restart after a crash")):
        command = commands.add_parser(name, help=doc)
        command.add_argument("session", type=Path)
        command.add_argument("workspace", type=Path)
        command.add_argument("provider_url")
        command.add_argument("task", nargs="?")
    commands.add_parser("describe", help="load the app and print its tools as JSON on stdout")
    return p


def host_args(parser: argparse.ArgumentParser, argv: list[str] | None,
              quiet_env: Mapping[str, str]) -> argparse.Namespace | int:
    """The host's command line, parsed, with `session` and `workspace` resolved and the session
    folder made, and the hosted run's environment set (`quiet_env`, and `OPENAI_BASE_URL` at the
    provider, or at nothing for `describe`); or the exit code (2 for bad usage)."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    os.environ.update(quiet_env)
    if args.command == "describe":
        os.environ["OPENAI_BASE_URL"] = DESCRIBE_BASE_URL
        return args
    if args.command == "run" and args.task is None:
        print("run needs a TASK", file=sys.stderr)
        return 2
    args.session, args.workspace = args.session.resolve(), args.workspace.resolve()
    made_session(args.session)
    os.environ["OPENAI_BASE_URL"] = args.provider_url
    return args


def made_session(session: Path) -> None:
    """The session directory, made and its name synced into its parent. A deployment has its
    state directory in place before the agent runs; the host makes it per case, so it makes it
    durable too: otherwise a power loss takes the whole store with it ("gone with its folder"),
    which is the host's doing, not the framework's."""
    if session.is_dir():
        return
    session.mkdir(parents=True, exist_ok=True)
    fd = os.open(session.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def describe(tools_of_app: Callable[[], Iterable[Mapping[str, Any]]]) -> int:
    """The host's `describe` command: print `{"tools": [{"name", "parameters", "description"}]}`
    (one line of JSON on stdout) for the tools `tools_of_app` finds once it has loaded and built
    the app; exit 1 with the traceback on stderr if that raises.

    The app is built in a scratch directory as its current directory (a run builds it in the
    workspace): whatever building it writes is removed with it. Anything the app prints while
    loading goes to stderr, so stdout holds the JSON alone."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="crashmatrix-describe-") as scratch:
        os.chdir(scratch)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                tools = [{"name": t["name"], "parameters": t.get("parameters"),
                          "description": t.get("description") or ""} for t in tools_of_app()]
        except Exception:
            traceback.print_exc()
            return 1
        finally:
            os.chdir(here)
    print(json.dumps({"tools": tools}, ensure_ascii=False))
    return 0


def import_app(ref: str, paths: list[str], example: str) -> Any:
    """What `MODULE:ATTR` names, importing MODULE with `paths` first on sys.path (ValueError
    naming `example` for a malformed reference)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"--app {ref!r}: expected MODULE:ATTR, e.g. {example}")
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    return getattr(importlib.import_module(module_name), attr)


def read_sqlite_copy(session: Path, db: str, companions: tuple[str, ...], prefix: str,
                     read: Callable[[sqlite3.Connection], Any]) -> Any:
    """`read` run on a copy of the database `session/db` and its companion files (`-wal`,
    `-shm`): reading never changes the session (closing a WAL database may checkpoint it into
    the main file), and a crash's uncheckpointed commits are kept. The caller handles
    sqlite3 errors."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        copy = Path(tmp) / db
        for suffix in ("", *companions):
            source = session / f"{db}{suffix}"
            if source.exists():
                shutil.copyfile(source, f"{copy}{suffix}")
        conn = sqlite3.connect(copy)
        try:
            return read(conn)
        finally:
            conn.close()


class HostedAdapter:
    """An adapter for an app hosted by an integration's host program. A subclass names the
    host, what the zygote preloads, the environment variable naming the app, the shipped
    example and the environment every hosted run gets; `with_app` is the registry's
    `NAME:MODULE:ATTR`."""

    name: str
    program: tuple[str, ...]
    host: str
    preload: tuple[str, ...]
    app_env: str
    default_app: str
    example_dir: Path
    quiet_env: Mapping[str, str]

    def __init__(self, app: str | None = None) -> None:
        self._app = app  # None: from the environment, else the example
        # describe's answers, by the command line that produced them (the app, hence the flags,
        # may come from the environment or the current directory).
        self._described: dict[tuple[str, ...], tuple[ToolSpec, ...]] = {}

    def with_app(self, app: str) -> Self:
        """This adapter for the app `MODULE:ATTR`."""
        return type(self)(app)

    @property
    def app(self) -> str:
        return self._app or os.environ.get(self.app_env) or self.default_app

    @property
    def python(self) -> PythonEntry | None:
        # --line-coverage measures the app's own package (the host is ours, not the user's).
        package = self.app.partition(":")[0].partition(".")[0]
        return PythonEntry(self.host, f"{self.host}:main", self.preload, coverage_source=package)

    def _flags(self) -> list[str]:
        # The example is found in this checkout; a user's app from where crashmatrix runs.
        paths = [str(self.example_dir)] if self.app == self.default_app else [os.getcwd()]
        flags = ["--app", self.app]
        for path in paths:
            flags += ["--path", path]
        return flags

    def start_args(self, spec: LaunchSpec, task: str) -> list[str]:
        return [*self._flags(), "run", *_where(spec), task]

    def recover_args(self, spec: LaunchSpec) -> list[str]:
        return [*self._flags(), "recover", *_where(spec)]

    def env(self) -> dict[str, str]:
        # Also set by the host itself; here too so a fresh interpreter has them from its start.
        return {**self.quiet_env, self.app_env: self.app}

    @property
    def agent_name(self) -> str:
        """How `--agent` names this adapter and its app."""
        return self.name if self._app is None else f"{self.name}:{self._app}"

    def declared_tools(self) -> tuple[ToolSpec, ...]:
        """The app's tools, as its framework gives them to the model (no replay policy: a
        framework does not say), from the host's `describe` run in a child process (a framework
        is imported there, never in the harness). PreflightError when the app does not load."""
        command = (*self.program, *self._flags(), "describe")
        if command not in self._described:
            self._described[command] = self._describe(command)
        return self._described[command]

    def _describe(self, command: tuple[str, ...]) -> tuple[ToolSpec, ...]:
        env = {**agent_environment(os.environ, pass_env_of(self)), **self.env()}
        env.pop("CRASHMATRIX_PROBE", None)  # describe is no incarnation: it must not probe
        shown = shlex.join(command)
        code, stdout, stderr = self._described_by(command, env)
        if code is None:
            raise PreflightError(f"agent {self.agent_name!r} does not load: loading the app "
                                 f"{self.app!r} took more than {DESCRIBE_TIMEOUT_S:g} s ({shown} "
                                 f"was killed):\n{_tail(stderr)}")
        if code != 0:
            raise PreflightError(f"agent {self.agent_name!r} does not load: the app {self.app!r} "
                                 f"failed to import or build ({shown} exited {code}):\n"
                                 f"{_tail(stderr)}")
        try:
            return parse_tools(stdout)
        except ValueError as exc:
            raise PreflightError(f"agent {self.agent_name!r} does not load: {shown} printed no "
                                 f"tool list ({exc}):\n{_tail(stderr)}") from None

    def _described_by(self, command: tuple[str, ...],
                      env: dict[str, str]) -> tuple[int | None, str, str | bytes | None]:
        """`describe` run to its end: (exit code, None on timeout; stdout; stderr). Forked from a
        zygote that preloaded the framework when the command keeps one for its run (the
        framework is then imported once: warm_zygotes.py); else a fresh interpreter."""
        forked = forked_command(self.preload, f"{self.host}:main", [*self._flags(), "describe"], env,
                                Path.cwd(), DESCRIBE_TIMEOUT_S)
        if forked is not None:
            # One stream for both: the tool list is the last line that is one (`_tools_line`).
            return forked.code, _tools_line(forked.output), forked.output
        try:
            # On timeout, run() kills the child and reaps it before raising.
            done = subprocess.run(command, env=env, cwd=os.getcwd(), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=DESCRIBE_TIMEOUT_S,
                                  check=False)
        except subprocess.TimeoutExpired as exc:
            return None, "", exc.stderr
        return done.returncode, done.stdout, done.stderr


def _tools_line(output: str) -> str:
    """Describe's tool list out of `output`, which has its stderr in it too: from the last
    `{"tools":` to the end of that line (what the app wrote to stderr may come before it on the
    same line, with no newline of its own, or after it); "" when there is none."""
    start = output.rfind('{"tools":')
    return "" if start < 0 else output[start:].partition("\n")[0]


def parse_tools(stdout: str) -> tuple[ToolSpec, ...]:
    """The tools in `describe`'s output (its last line: `{"tools": [...]}`); ValueError naming
    what is wrong."""
    lines = stdout.strip().splitlines()
    if not lines:
        raise ValueError("its stdout is empty")
    found = json.loads(lines[-1])  # a JSONDecodeError is a ValueError
    tools = found.get("tools") if isinstance(found, dict) else None
    if not isinstance(tools, list):
        raise ValueError('expected {"tools": [...]}')
    specs = []
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"a tool without a name: {tool!r}")
        parameters = tool.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise ValueError(f"tool {name!r}: parameters must be a JSON Schema object")
        specs.append(ToolSpec(name, parameters, None, str(tool.get("description") or "")))
    return tuple(specs)


def dist_versions(*names: str) -> str:
    """`name version` of each installed distribution, joined ("not installed" for a missing
    one): a durability table's version column, read without importing the framework."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415 - rarely needed

    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def _tail(stderr: str | bytes | None) -> str:
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr or ""
    lines = text.rstrip().splitlines()[-STDERR_TAIL:]
    return "\n".join(lines) if lines else "(nothing on stderr)"


def _where(spec: LaunchSpec) -> list[str]:
    return [str(Path(spec.session).resolve()), str(Path(spec.workspace).resolve()), spec.provider_url]
