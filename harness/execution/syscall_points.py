"""System-call points, probes on (`--syscalls`): which store calls are crash points, their counts, the kill.

A traced incarnation (probes attached, strace following its threads) lists its store calls on
the session directory's files, the calls black-box mode selects (`blackbox.STORE_CALLS` and
truncating opens). Each is numbered as strace will count it when a later run is killed there:
the n-th call of that system call *by the agent's main thread*, whatever file it names. That
count needs neither `-f` nor `-P`, so the killed run is traced whole (every call of the main
thread, on every file): a `power` step computes from that trace what a power loss at the call
leaves, which a trace narrowed to one file (`-P`, as black-box kills use) could not show.

An entry is `N:syscall:file`; `SAME` marks one that a crash at the probe event just before it
stands for, for the faults enumerated at that event (no change to the session in between: the
matrix already has that state), `REFUSED` one on a file another thread or process stores to too.
"Traced whole" means the main thread's every call: a store written from other threads is
refused, and its incarnation gets no power-loss step at all (the power model would not see
those threads' writes and syncs). Counting every call of the main thread asks the killed run to
make the same calls before the point as the recording did: no incarnation of a `--syscalls` run
writes a bytecode cache (`PYTHONDONTWRITEBYTECODE`, honoured by forked children too), so the
imports open the same files each time. A run that does not reach the call, or reaches it on
another file, is caught (`landed`) and the case is nondeterministic, never held; so is a count
that drifts onto another call of the same file, where the recording's listing is at hand (the
step's `ordinal`: in a matrix, and for `repro` of a first step; not for a deeper step `repro`
reads from its id alone).
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


def points(calls: Sequence[FsCall], session: Path, events_fd: int | None,
           events: Sequence[str] = ()) -> list[str]:
    """The store calls among `calls` (a traced incarnation's, in the order they ended, threads
    followed), each `N:syscall:file` with N its main-thread count (see the module). The main
    thread is the one that made the first call.

    `SAME`-prefixed, with the probe event before it (`=kind:label@N:syscall:file`, the event as
    `events`, the incarnation's `kind:label` points, name it): a call with that event before it
    and no change to the session between the two, so a crash at that event leaves the state a
    crash entering the call leaves (for each fault enumerated at that event). `REFUSED` (`!`):
    a call on a file another thread or process also stores to; its main-thread count is no
    count of the other's calls, and the file's state at the call depends on them."""
    if not calls:
        return []
    root = os.path.realpath(session)
    main = calls[0].pid
    shared = {_point(c, root).partition(":")[2] for c in calls
              if c.pid != main and _store_call(c) and _under_any(c, root)}
    counts: dict[Syscall, int] = {}
    out: list[str] = []
    seen_events = 0
    since: str | None = None  # the probe event since the last change to the session, if any
    for call in calls:
        ours = call.pid == main
        if ours:
            counts[call.syscall] = counts.get(call.syscall, 0) + 1
        if events_fd is not None and ours and call.syscall is Syscall.WRITE and call.fd == events_fd \
                and not _under_any(call, root):
            seen_events += 1
            since = events[seen_events - 1] if seen_events <= len(events) else None
            continue
        if not _under_any(call, root) or not _changes(call):
            continue
        point = _point(call, root)
        if not ours or point.partition(":")[2] in shared:
            if ours and _store_call(call):
                out.append(f"{REFUSED}{counts[call.syscall]}:{point}")
        elif _store_call(call):
            out.append(f"{SAME}{since}@{counts[call.syscall]}:{point}" if since is not None
                       else f"{counts[call.syscall]}:{point}")
        since = None  # the session changed: a crash here is no longer the event's state
    return out


def kill_args(syscall: str, n: int) -> list[str]:
    """strace options (before `--`, with no `-f`) killing the agent's main thread, and with it
    the agent, as it enters its `n`-th `syscall`; the whole trace of that thread is kept."""
    if n < 1:
        raise ValueError(f"when={n}: calls are counted from 1")
    return ["-e", "signal=none", "-e", f"inject={syscall}:signal=KILL:when={n}"]


def landed(calls: Sequence[FsCall], session: Path, syscall: str, label: str, n: int,
           ordinal: int | None = None) -> str | None:
    """Why the run traced with `kill_args` was not killed where its step says (None: it was):
    its `n`-th `syscall` must name the step's file and never have returned, and (`ordinal`, when
    the recording's listing is at hand) be the same call of that file as in the recording."""
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
    if ordinal is not None:
        point = f"{syscall}:{label}"
        nth = sum(1 for c in matching[:n]
                  if _under_any(c, root) and _store_call(c) and _point(c, root) == point)
        if nth != ordinal:
            return (f"its {syscall} call {n} was {syscall} {nth} of {label}, the recording's was "
                    f"{syscall} {ordinal} of it (the count drifted onto another call of the file)")
    return None


def _changes(call: FsCall) -> bool:
    """Whether the call changes the session's state (a store call, a file created, a folder
    made): a crash after it is not the state of the probe event before it."""
    if call.syscall in OPENS:
        return TRUNCATING in call.flags or "O_CREAT" in call.flags
    return call.syscall in STORE_CALLS or call.syscall in (Syscall.MKDIR, Syscall.MKDIRAT)


def _store_call(call: FsCall) -> bool:
    if call.syscall in OPENS:
        return TRUNCATING in call.flags
    return call.syscall in STORE_CALLS


def _under_any(call: FsCall, root: str) -> bool:
    return any(p == root or p.startswith(root + os.sep) for p in call.paths)


def _point(call: FsCall, root: str) -> str:
    """`syscall:file`, the file relative to the session directory (a rename: the file renamed)."""
    return f"{call.syscall.value}:{file_label(os.path.relpath(call.paths[0], root))}"
