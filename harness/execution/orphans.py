"""What a case's agent left running ends with its case: the orphans the harness adopted, by mark.

The harness is a child subreaper (subreaper.py): a daemon an agent's tool starts (`setsid` after
a double fork) leaves the agent's tree and group, and is adopted by the harness rather than by
init. Those used to live until the command's end: through the other cases, where such a daemon
can write into the shared scratch filesystem or hold a port. Each incarnation carries its case's
mark in its environment (CASE_ENV: the case tree's path, unique in the run), which its processes
inherit; when the case ends, every process the harness adopted that carries the mark is stopped,
killed with what it started, and reaped. An orphan that scrubbed its environment is not found
here, nor one forked without an exec from an agent the zygote forked (its /proc environ is
the zygote's, as it was at the zygote's exec); the command's end still ends those.

Adopted orphans are the harness's direct children, listed cheaply by the kernel
(/proc/self/task/*/children), so a case that left nothing costs a few small reads.

An orphan that exited before its case ended is a zombie: it has no environment left to carry the
mark, and it used to stay in the process table until the command ended (seen: one for 7 minutes
of a depth-2 run). It is reaped at the next case's end by its session instead (`reap_adopted`):
every incarnation is a session of its own, so what its tools left has that session's id, never
its own pid (a process the harness started in a new session) nor the harness's session (one it
started in its own). Reaping a zombie the harness started itself would take the exit status its
`Popen` waits for; the session rule never does, whoever's spawner started it.
"""

from __future__ import annotations

import contextlib
import os

import psutil

CASE_ENV = "CRASHMATRIX_CASE"
GONE_S = 2.0


def _children() -> list[int]:
    pids: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return pids
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as f:
                pids += [int(p) for p in f.read().split()]
        except (OSError, ValueError):
            continue
    return pids


def end_orphans(mark: str, spared: frozenset[int] = frozenset()) -> int:
    """Stop, kill and reap the harness's children that carry `mark` (and what they started);
    `spared`: pids not to touch (the case's own processes, already ended by their kill).
    Returns how many processes were ended."""
    marked: list[psutil.Process] = []
    children = _children()
    for pid in children:
        if pid in spared:
            continue
        try:
            p = psutil.Process(pid)
            if p.environ().get(CASE_ENV) == mark:
                marked.append(p)
        except psutil.Error:
            continue
    ended: list[psutil.Process] = []
    for p in marked:
        with contextlib.suppress(psutil.Error):
            p.suspend()  # stopped first: a stopped process forks nothing more
            ended += [p, *p.children(recursive=True)]
    for p in ended:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(ended, timeout=GONE_S)
    reap_adopted(children)
    return len(ended)


def _zombie_session(pid: int) -> int | None:
    """The session id of `pid` if it is a zombie (from /proc/PID/stat, which a zombie keeps)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # `pid (comm) state ppid pgrp session ...`: comm may hold spaces and parentheses.
    fields = stat[stat.rfind(")") + 2:].split()
    if len(fields) < 4 or fields[0] != "Z":
        return None
    try:
        return int(fields[3])
    except ValueError:
        return None


def reap_adopted(children: list[int]) -> int:
    """Reap those of the harness's `children` that are zombie adopted orphans: in a session
    neither their own nor the harness's (see above). Returns how many were reaped."""
    ours = os.getsid(0)
    reaped = 0
    for pid in children:
        session = _zombie_session(pid)
        if session is None or session in (pid, ours):
            continue
        with contextlib.suppress(ChildProcessError):
            reaped += os.waitpid(pid, os.WNOHANG)[0] == pid
    return reaped
