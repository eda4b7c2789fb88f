"""Black-box crash points: an agent's calls on its store, found by strace and killed at, without probes.

An agent that cannot be probed (a framework's, one in another language, ours with probes off)
still writes and syncs its store: the files under its session directory. A traced recording
lists those calls (`store_points`); each becomes a crash point, `b03:fsync:session.jsonl`, the
3rd fsync of that file. strace then kills a later run as it *enters* that call
(`kill_args`: `-e inject=fsync:signal=KILL:when=3 -P FILE`; the signal lands before the call
runs, so a killed write wrote nothing and a killed sync synced nothing), and the trace says
whether it did (`landed`): a call that never came makes the case nondeterministic, not held.

The counting is strace's: per system call, per file given with `-P` (a call on any other file
does not count) and per traced thread. So the points are the calls strace can count again: a
file whose store calls come from more than one thread (a framework's thread pool, DBOS's
executor, Node's libuv workers) gives no crash point, since its n-th call is another call in
another run, and the recording lists it as refused (`REFUSED`, with the threads counted) so that
the run can say why. An open that truncates is a store call too (it empties the file), when it
names the file by an absolute path (strace's `-P` matches an open by the path as given); other
opens of the same file are listed as counted only (`COUNTED`): strace's ordinal counts them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from crashmatrix.harness.execution.fs_inject import inject_args
from crashmatrix.harness.records.blackbox_points import COUNTED, REFUSED, file_label, file_of
from crashmatrix.harness.records.fs_calls import FsCall, Syscall

S = Syscall
# What changes a store's bytes, names or durability: the calls a crash before which leaves a
# different state. Opens and closes change nothing a crash could lose; seeks move no bytes.
STORE_CALLS = frozenset({S.WRITE, S.WRITEV, S.PWRITE64, S.FSYNC, S.FDATASYNC, S.FTRUNCATE, S.TRUNCATE,
                         S.RENAME, S.RENAMEAT, S.RENAMEAT2, S.UNLINK, S.UNLINKAT})
KILL = "signal=KILL"
OPENS = frozenset({S.OPEN, S.OPENAT, S.CREAT})
TRUNCATING = "O_TRUNC"  # among an open's flags (creat implies it; the parser says so)


def store_points(calls: Sequence[FsCall], session: Path) -> list[str]:
    """The store calls among `calls` (a recording's, in the order they ended), as `syscall:file`
    with the file relative to the session directory (`.` for the directory itself); a rename is
    named by the file it renames (`rename:config.tmp`): strace's `-P` matches a rename by its
    first path only. Calls that failed are kept: a retry is a call too. An open that does not
    truncate is `COUNTED`-prefixed, every call on a file stored to from several threads
    `REFUSED`-prefixed."""
    root = os.path.realpath(session)
    found: list[tuple[FsCall, str, bool]] = []  # (call, point, a crash point)
    for call in calls:
        if not any(_under(p, root) for p in call.paths) or call.relative:
            continue  # another file's, or one strace's -P neither matches nor counts
        point = f"{call.syscall.value}:{file_label(os.path.relpath(call.paths[0], root))}"
        if call.syscall in OPENS:
            found.append((call, point, TRUNCATING in call.flags))
        elif call.syscall in STORE_CALLS:
            found.append((call, point, True))
    # strace counts per thread: a file whose calls (counted ones included) come from more than
    # one thread has no n-th call that another run repeats, nor one state at any of them.
    threads: dict[str, set[int]] = {}
    for call, point, _ in found:
        threads.setdefault(point.partition(":")[2], set()).add(call.pid)
    stored = {point.partition(":")[2] for _, point, crash in found if crash}
    points = []
    for _, point, crash in found:
        file = point.partition(":")[2]
        if file not in stored:
            continue  # only opened: nothing stored there, nothing to count
        if len(threads[file]) > 1:
            points.append(REFUSED + point)
        else:
            points.append(point if crash else COUNTED + point)
    return points


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def target(session: Path, label: str) -> Path:
    """The file a step names, resolved as strace shows paths (it matches `-P` against those)."""
    return Path(os.path.realpath(session / file_of(label)))


def kill_args(session: Path, syscall: str, label: str, n: int) -> list[str]:
    """strace options killing the agent as it enters its `n`-th `syscall` on `label`."""
    return inject_args(target(session, label), syscall, KILL, n)


def landed(calls: Sequence[FsCall], session: Path, syscall: str, label: str, n: int) -> bool:
    """Whether the traced run (traced with `kill_args`) died inside its `n`-th `syscall` on the
    file: that call is there and never returned."""
    path = str(target(session, label))
    matching = [c for c in calls if c.syscall.value == syscall and path in c.paths]
    return len(matching) >= n and matching[n - 1].result is None
