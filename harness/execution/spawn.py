"""What starting an incarnation means: the launch, the process handle and the spawner contract.

Both give a real process in its own session (so its own process group), with its own
environment, working directory, output file and probe channel, which the harness can SIGKILL.
"""

from __future__ import annotations

import os
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
    # Run under coverage.py measuring this package, saving to this data file on a normal exit.
    coverage: tuple[Path, str] | None = None


class Process(Protocol):
    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Spawner(Protocol):
    mode: SpawnMode

    def spawn(self, launch: Launch, probe_fds: tuple[int, int]) -> Process: ...

    def close(self) -> None: ...


def probe_env(read_fd: int, write_fd: int) -> dict[str, str]:
    return {"CRASHMATRIX_PROBE": f"fd:{read_fd},{write_fd}"}


def null_fd() -> int:
    return os.open(os.devnull, os.O_RDWR)
