"""How an incarnation's process is started: a fresh interpreter, or a fork of the zygote.

Both give a real process in its own session (so its own process group), with its own
environment, working directory, output file and probe channel, which the harness can SIGKILL.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol


class SpawnMode(StrEnum):
    FORK = "fork"
    FRESH = "fresh"


@dataclass(frozen=True)
class Launch:
    module: str  # run as `python -m MODULE ARGS...` in a fresh interpreter
    entry: str  # `package.module:function`, called with ARGS in a forked child; returns the exit code
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


class FreshSpawner:
    """A new interpreter per incarnation: slow (it imports everything again), but simple."""

    mode = SpawnMode.FRESH

    def spawn(self, launch: Launch, probe_fds: tuple[int, int]) -> Process:
        env = {**launch.env, **probe_env(*probe_fds)}
        out = launch.output.open("ab") if launch.output else None
        try:
            argv = [sys.executable, "-m", launch.module, *launch.args]
            if launch.coverage is not None:
                data, source = launch.coverage
                argv = [sys.executable, "-m", "crashmatrix.harness.covered", str(data), source, launch.entry,
                        *launch.args]
            return subprocess.Popen(
                argv,
                env=env,
                cwd=launch.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out or subprocess.DEVNULL,
                stderr=subprocess.STDOUT if out else subprocess.DEVNULL,
                pass_fds=probe_fds,
                start_new_session=True,
            )
        finally:
            if out is not None:
                out.close()

    def close(self) -> None:
        pass


def make_spawner(mode: SpawnMode, preload: list[str]) -> Spawner:
    if mode is SpawnMode.FRESH:
        return FreshSpawner()
    from crashmatrix.harness.zygote import Zygote  # noqa: PLC0415 - fork mode only

    return Zygote(preload)


def null_fd() -> int:
    return os.open(os.devnull, os.O_RDWR)
