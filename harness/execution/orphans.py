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
    for pid in _children():
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
    return len(ended)
