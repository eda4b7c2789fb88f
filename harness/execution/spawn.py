"""What starting an incarnation means: the launch, the process handle and the spawner contract.

Both give a real process in its own session (so its own process group), with its own
environment, working directory, output file and probe channel, which the harness can SIGKILL,
and which the kernel SIGKILLs when its parent dies (`die_with_parent`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol


class SpawnMode(StrEnum):
    FORK = "fork"
    FRESH = "fresh"


@dataclass(frozen=True)
class Launch:
    program: tuple[str, ...]  # a fresh process runs PROGRAM ARGS... (any executable)
    # `package.module:function`, called with ARGS in a forked child (returns the exit code); None
    # for an agent the zygote cannot fork (not Python, or no entry point offered).
    entry: str | None
    args: list[str]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    output: Path | None = None  # stdout and stderr go here (else /dev/null)
    # Or to this descriptor, when set (the write end of a `CappedOutput`): the spawner dups it.
    output_fd: int | None = None
    # Run under coverage.py measuring this package, saving to this data file on a normal exit.
    coverage: tuple[Path, str] | None = None
    # False in black-box mode: the probe pipe is still passed (its end of file says the agent
    # and its children are gone), but the agent is not told of it, so its probes are no-ops.
    probes: bool = True


class Process(Protocol):
    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Spawner(Protocol):
    mode: SpawnMode

    def spawn(self, launch: Launch, probe_fds: tuple[int, int]) -> Process: ...

    def close(self) -> None: ...


PROBE_ENV = "CRASHMATRIX_PROBE"


def probe_env(read_fd: int, write_fd: int) -> dict[str, str]:
    return {PROBE_ENV: f"fd:{read_fd},{write_fd}"}


def agent_env(launch: Launch, probe_fds: tuple[int, int]) -> dict[str, str]:
    """The environment an incarnation starts with: the launch's, plus the probe channel unless
    its probes are off (then a channel the harness's own environment names is removed too)."""
    if launch.probes:
        return {**launch.env, **probe_env(*probe_fds)}
    return {k: v for k, v in launch.env.items() if k != PROBE_ENV}


def output_fd(launch: Launch) -> int | None:
    """A new descriptor for the incarnation's stdout and stderr (the caller closes it), or None
    for none (/dev/null)."""
    if launch.output_fd is not None:
        return os.dup(launch.output_fd)
    if launch.output is not None:
        return os.open(launch.output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    return None


def null_fd() -> int:
    return os.open(os.devnull, os.O_RDWR)


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up once, in the parent: a forked child then makes one foreign call, loading nothing.
_PRCTL = _prctl()


def die_with_parent(parent: int) -> None:
    """In a child just forked by process `parent`: have the kernel SIGKILL it when the parent dies.

    A SIGKILLed harness runs no handler, so this is what keeps its agents from running on (a
    hung one for as long as its tool hangs). It reaches one level, so each level asks for it: the
    zygote dies with the harness, an incarnation with the zygote, a fresh incarnation with the
    harness. The kernel sends it when the *thread* that forked the child ends, not only the
    process: the zygote is started by the command's main thread, a fresh incarnation by the
    thread running its case, which reaps it before the case ends. The agent's own children do not
    inherit it (a tool's processes are the agent's to end). If the parent died before the request
    was made, the child is an orphan already and ends itself.
    """
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def signal_leader(pid: int, sig: int) -> None:
    """`sig` to the agent `pid` and to its process group.

    The pid itself too: a zygote reports its child's pid as soon as it forks, before the child's
    setsid, so a kill that soon (an interrupt, a deadline already past) finds no group of that id;
    the child, never signalled, would run on and the reaping `wait` would never return. The pid
    is safe to signal: the caller has not reaped it.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
