"""System-call points, probes on (`--syscalls`): which store calls are crash points, their counts, the kill.

A traced incarnation (probes attached, strace following its threads) lists its store calls on
the session directory's files, the calls black-box mode selects (`blackbox.STORE_CALLS` and
truncating opens). Each is numbered as strace will count it when a later run is killed there:
the n-th call of that system call *by the agent's main thread*, whatever file it names. That
count needs neither `-f` nor `-P`, so the killed run is traced whole (every call of the main
thread, on every file): a `power` step computes from that trace what a power loss at the call
leaves, which a trace narrowed to one file (`-P`, as black-box kills use) could not show.

An entry is `N:syscall:file`; `SAME` marks one that a kill at the probe event just before it
stands for (no store call in between: the matrix already has that state), `REFUSED` one made by
another thread (its main-thread count is no count of it). Counting every call of the main thread
asks that run to make the same calls before the point, which a traced agent does when it
writes no bytecode cache (`PYTHONDONTWRITEBYTECODE` is set for these incarnations): a run that
does not is caught (`landed`) and the case is nondeterministic, never held.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from crashmatrix.harness.execution.blackbox import OPENS, STORE_CALLS, TRUNCATING
from crashmatrix.harness.records.blackbox_points import REFUSED, SAME, file_label
from crashmatrix.harness.records.fs_calls import FsCall, Syscall

# What the traced incarnations are given: no bytecode written while traced, so that two runs of
# one incarnation make the same calls whether or not an earlier one cached its modules.
NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}


def points(calls: Sequence[FsCall], session: Path, events_fd: int | None) -> list[str]:
    """The store calls among `calls` (a traced incarnation's, in the order they ended, threads
    followed), each `N:syscall:file` with N its main-thread count (see the module), `SAME`- or
    `REFUSED`-prefixed as the module says. The main thread is the one that made the first call."""
    if not calls:
        return []
    root = os.path.realpath(session)
    main = calls[0].pid
    counts: dict[Syscall, int] = {}
    out: list[str] = []
    evented = False  # a probe event since the last store call
    for call in calls:
        if call.pid != main:
            if _store_call(call) and _under_any(call, root):
                out.append(f"{REFUSED}0:{_point(call, root)}")
            continue
        counts[call.syscall] = counts.get(call.syscall, 0) + 1
        if events_fd is not None and call.syscall is Syscall.WRITE and call.fd == events_fd \
                and not _under_any(call, root):
            evented = True
            continue
        if not _store_call(call) or not _under_any(call, root):
            continue
        out.append(f"{SAME if evented else ''}{counts[call.syscall]}:{_point(call, root)}")
        evented = False
    return out


def kill_args(syscall: str, n: int) -> list[str]:
    """strace options (before `--`, with no `-f`) killing the agent's main thread, and with it
    the agent, as it enters its `n`-th `syscall`; the whole trace of that thread is kept."""
    if n < 1:
        raise ValueError(f"when={n}: calls are counted from 1")
    return ["-e", "signal=none", "-e", f"inject={syscall}:signal=KILL:when={n}"]


def landed(calls: Sequence[FsCall], session: Path, syscall: str, label: str, n: int) -> str | None:
    """Why the run traced with `kill_args` was not killed where its step says (None: it was):
    its `n`-th `syscall` must name the step's file and never have returned."""
    matching = [c for c in calls if c.syscall.value == syscall]
    if len(matching) < n:
        return f"it made {len(matching)} {syscall} call(s), fewer than {n}"
    call = matching[n - 1]
    root = os.path.realpath(session)
    named = _point(call, root).partition(":")[2] if _under_any(call, root) else (call.paths or ("?",))[0]
    if named != label:
        return f"its {syscall} call {n} was on {named}, not {label}"
    if call.result is not None:
        return f"its {syscall} call {n} on {label} returned"
    return None


def _store_call(call: FsCall) -> bool:
    if call.syscall in OPENS:
        return TRUNCATING in call.flags
    return call.syscall in STORE_CALLS


def _under_any(call: FsCall, root: str) -> bool:
    return any(p == root or p.startswith(root + os.sep) for p in call.paths)


def _point(call: FsCall, root: str) -> str:
    """`syscall:file`, the file relative to the session directory (a rename: the file renamed)."""
    return f"{call.syscall.value}:{file_label(os.path.relpath(call.paths[0], root))}"
