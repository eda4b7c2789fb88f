"""Every process an agent leaves behind ends with the command: the harness as a child subreaper.

An incarnation's kill ends its process tree and its group, but a daemon (`setsid` after a double
fork) leaves both before the kill and, orphaned, would be adopted by init: it outlived the case
and the run, and could rewrite the results after the harness had exited. Linux lets a process
adopt its orphaned descendants instead (`PR_SET_CHILD_SUBREAPER`): then whatever an agent leaves
running stays under the harness, and when the command ends every process still under it is
stopped, killed and reaped. (A harness that is itself SIGKILLed cannot do this: that is what a
PID namespace or a cgroup would add.)
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys

import psutil

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
STOP_ROUNDS = 8  # stop, then look again: a stopped process forks nothing (as incarnation.py does)
GONE_S = 2.0


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants; False where the platform cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def end_leftovers() -> int:
    """Stop, kill and reap every process still under this one (call when nothing of ours should
    be running any more); returns how many were still running. An adopted orphan that already
    exited (a tool's child that outlived its killed agent, then ended) is a zombie nobody waited
    for: it is reaped too, and not counted, since it left nothing running."""
    me = psutil.Process()
    found: dict[int, psutil.Process] = {}
    running = 0
    for _ in range(STOP_ROUNDS):
        try:
            new = [p for p in me.children(recursive=True) if p.pid not in found]
        except psutil.Error:
            break
        if not new:
            break
        for p in new:
            found[p.pid] = p
            with contextlib.suppress(psutil.Error):
                running += p.status() != psutil.STATUS_ZOMBIE
                p.suspend()
    for p in found.values():
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(list(found.values()), timeout=GONE_S)  # reaps those that are our children
    return running
