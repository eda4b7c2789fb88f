"""Zygotes started early, to describe a hosted app's tools, and kept for the run that forks from them.

A framework app's tools are read before any case runs (`HostedAdapter.declared_tools`: which
scenarios fit the agent), by the host's `describe` command in a child process, since no framework is
imported in the harness. Run as a fresh interpreter, that child imports the framework (1.3-1.6 s of
CPU for LangGraph, the Agents SDK or Pydantic AI + DBOS), and then the run's zygote imports it
again. Inside `kept()` (each `crashmatrix` command: cli/main.py) an adapter's one-off command
(`interface.forked_command`) is instead forked from a zygote that preloaded the same modules, and
`make_spawner` takes that zygote for the run: the framework is imported once per command. A run
that does not take it (`--spawn fresh`, `--line-coverage`, whose zygote measures its imports)
has paid what the fresh interpreter would have cost, and `make_spawner` closes it then.

A zygote dies with the thread that started it (its parent-death signal), so one is started only on
the main thread; elsewhere the adapter starts a fresh process, as it does outside `kept`.
Whatever is not taken is closed when `kept` ends: no process outlives the command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from crashmatrix.harness.adapters.interface import FORKED_COMMAND, CommandOutcome
from crashmatrix.harness.execution.spawn import Launch, signal_leader
from crashmatrix.harness.execution.zygote import Zygote, ZygoteError

_lock = threading.Lock()
_warm: dict[tuple[str, ...], Zygote] = {}  # by what it preloaded


@contextmanager
def kept() -> Iterator[None]:
    """Within it, adapters' one-off commands are forked from zygotes `make_spawner` may take;
    on leaving, every zygote not taken is closed (an enclosing `kept`'s are its own again)."""
    token = FORKED_COMMAND.set(_forked)
    with _lock:
        outer = dict(_warm)
        _warm.clear()
    try:
        yield
    finally:
        FORKED_COMMAND.reset(token)
        with _lock:
            left = list(_warm.values())
            _warm.clear()
            _warm.update(outer)
        for zygote in left:
            zygote.close()


def take(preload: list[str]) -> Zygote | None:
    """The warm zygote that preloaded exactly `preload`, now the caller's to close; None if none."""
    with _lock:
        return _warm.pop(tuple(preload), None)


def _forked(preload: tuple[str, ...], entry: str, args: list[str], env: dict[str, str], cwd: Path,
            timeout_s: float) -> CommandOutcome | None:
    """`interface.forked_command` inside `kept`: None off the main thread, with nothing to
    preload, or when no zygote can be had (its preload does not import: the adapter's own fresh
    process then shows why, with the traceback, as it did before zygotes described)."""
    if not preload or threading.current_thread() is not threading.main_thread():
        return None
    with _lock:
        zygote = _warm.get(preload)
    try:
        if zygote is None:
            zygote = Zygote(list(preload))
            with _lock:
                _warm[preload] = zygote
        return _run_once(zygote, entry, args, env, cwd, timeout_s)
    except ZygoteError:
        with _lock:
            dead = _warm.pop(preload, None)
        if dead is not None:
            dead.close()  # not handed to the run: its cases would all fail on it
        return None


def _run_once(zygote: Zygote, entry: str, args: list[str], env: dict[str, str], cwd: Path,
              timeout_s: float) -> CommandOutcome:
    """`entry(args)` in a child of `zygote`, to its end (killed with its process group, and
    reaped, past `timeout_s`)."""
    probe_r, probe_w = os.pipe()  # unnamed to the child (probes off): no incarnation, no events
    with tempfile.TemporaryFile() as out:
        try:
            child = zygote.spawn(Launch(program=(entry,), entry=entry, args=args, cwd=cwd, env=env,
                                        output_fd=out.fileno(), probes=False), (probe_r, probe_w))
        finally:
            os.close(probe_r)
            os.close(probe_w)
        code: int | None
        try:
            code = child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            signal_leader(child.pid, signal.SIGKILL)  # and its group: what it started goes too
            child.wait()
            code = None
        out.seek(0)
        return CommandOutcome(code, out.read().decode(errors="replace"))
