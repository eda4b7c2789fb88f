"""What every framework integration shares: the hosted-app adapter, the host's command line, probes.

An integration hosts a user's app on a framework (`--agent NAME`, or `--agent NAME:MODULE:ATTR`
for the user's own): a host program the harness starts, with the app named on its command line,
and an adapter that knows which host, which app and where to find it. Probes come from the
framework's threads, so they go through one lock. Nothing here imports a framework.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from crashmatrix.harness.adapters.interface import LaunchSpec, PythonEntry
from crashmatrix.probe import ProbeDetached, probe

DETACHED_EXIT = 3  # the harness closed the channel: take no further step
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


def host_parser(prog: str, app_env: str, default_app: str) -> argparse.ArgumentParser:
    """`[--app MODULE:ATTR] [--path DIR]... run|recover SESSION WORKSPACE PROVIDER_URL [TASK]`."""
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--app", default=os.environ.get(app_env) or default_app)
    p.add_argument("--path", action="append", default=[])
    p.add_argument("command", choices=["run", "recover"])
    p.add_argument("session", type=Path)
    p.add_argument("workspace", type=Path)
    p.add_argument("provider_url")
    p.add_argument("task", nargs="?")
    return p


def host_args(parser: argparse.ArgumentParser, argv: list[str] | None,
              quiet_env: Mapping[str, str]) -> argparse.Namespace | int:
    """The host's command line, parsed, with `session` and `workspace` resolved and the session
    folder made, and the hosted run's environment set (`quiet_env`, and `OPENAI_BASE_URL` at the
    provider); or the exit code (2 for bad usage)."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    if args.command == "run" and args.task is None:
        print("run needs a TASK", file=sys.stderr)
        return 2
    args.session, args.workspace = args.session.resolve(), args.workspace.resolve()
    args.session.mkdir(parents=True, exist_ok=True)
    os.environ.update(quiet_env)
    os.environ["OPENAI_BASE_URL"] = args.provider_url
    return args


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

    host: str
    preload: tuple[str, ...]
    app_env: str
    default_app: str
    example_dir: Path
    quiet_env: Mapping[str, str]

    def __init__(self, app: str | None = None) -> None:
        self._app = app  # None: from the environment, else the example

    def with_app(self, app: str) -> Self:
        """This adapter for the app `MODULE:ATTR`."""
        return type(self)(app)

    @property
    def app(self) -> str:
        return self._app or os.environ.get(self.app_env) or self.default_app

    @property
    def python(self) -> PythonEntry:
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


def _where(spec: LaunchSpec) -> list[str]:
    return [str(Path(spec.session).resolve()), str(Path(spec.workspace).resolve()), spec.provider_url]
