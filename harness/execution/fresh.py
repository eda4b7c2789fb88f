"""The fresh spawner: a new interpreter per incarnation (`python -m MODULE ARGS...`)."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

from crashmatrix.harness.execution.spawn import (
    Launch,
    Process,
    SpawnMode,
    agent_env,
    die_with_parent,
    output_fd,
)


class FreshSpawner:
    """A new interpreter per incarnation: slow (it imports everything again), but simple."""

    mode = SpawnMode.FRESH

    def spawn(self, launch: Launch, probe_fds: tuple[int, int]) -> Process:
        env = agent_env(launch, probe_fds)
        out = output_fd(launch)
        try:
            argv = [*launch.program, *launch.args]
            if launch.coverage is not None and launch.entry is not None:
                data, source = launch.coverage
                argv = [sys.executable, "-m", "crashmatrix.harness.execution.covered", str(data), source,
                        launch.entry, *launch.args]
            return subprocess.Popen(
                argv,
                env=env,
                cwd=launch.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out or subprocess.DEVNULL,
                stderr=subprocess.STDOUT if out else subprocess.DEVNULL,
                pass_fds=probe_fds,
                start_new_session=True,
                # Between fork and exec, so even an agent not written in Python dies with the
                # harness. Safe with the harness's threads: it makes one foreign call looked up
                # before the fork, then getppid() and kill(), and takes no lock another thread
                # could hold at the fork (Popen has no other way to ask before the exec).
                preexec_fn=functools.partial(die_with_parent, os.getpid()),  # noqa: PLW1509
            )
        finally:
            if out is not None:
                os.close(out)

    def close(self) -> None:
        pass
