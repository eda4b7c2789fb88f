"""An agent's store read through its own `dump` command (records/transcript_dump.py), on a copy.

For an agent whose store no Python reader decodes (another language, a framework's own format):
its adapter names the command that prints the store in the canonical transcript's JSON, and its
`read_transcript` is `dumped_transcript(self, spec, self.dump_args)`. The command runs as the
agent does (its program, its allow-listed environment), with no probe channel, on a copy of the
session directory (so reading never changes what the next incarnation finds, whatever the
agent's reader does to its files), and within a deadline. Whatever goes wrong is the store
being unreadable, said in the transcript's `integrity_error`, never a harness error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from crashmatrix.harness.adapters.interface import LaunchSpec, pass_env_of
from crashmatrix.harness.records.agent_env import agent_environment
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.harness.records.transcript_dump import DumpError, parse_dump

DUMP_TIMEOUT_S = 60.0  # reading a store; more is a hung reader
STDERR_LINES = 5  # of a failed dump's stderr, quoted in the integrity error


class _Starts(Protocol):
    """What running the agent's dump takes of its adapter."""

    @property
    def program(self) -> tuple[str, ...]: ...

    def env(self) -> dict[str, str]: ...


def dumped_transcript(adapter: _Starts, spec: LaunchSpec,
                      dump_args: Callable[[Path], Sequence[str]]) -> Transcript:
    """The store as the agent's `dump` prints it (`dump_args(session)`: the arguments after the
    adapter's program, for a session directory)."""
    env = {**agent_environment(os.environ, pass_env_of(adapter)), **adapter.env()}
    env.pop("CRASHMATRIX_PROBE", None)  # a dump is no incarnation: it must not probe
    with tempfile.TemporaryDirectory(prefix="crashmatrix-dump-") as tmp:
        copy = Path(tmp) / "session"
        if Path(spec.session).is_dir():
            shutil.copytree(spec.session, copy, symlinks=True)
        else:
            copy.mkdir()
        command = [*adapter.program, *dump_args(copy)]
        try:
            done = subprocess.run(command, env=env, cwd=tmp, stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=DUMP_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return Transcript(integrity_error=f"dump: the agent's dump took more than {DUMP_TIMEOUT_S:g} s")
        except OSError as exc:
            return Transcript(integrity_error=f"dump: could not start {command[0]}: {exc}")
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-STDERR_LINES:]) or "nothing on stderr"
        return Transcript(integrity_error=f"dump exited {done.returncode}: {tail}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        return Transcript(integrity_error="dump printed nothing (expected the transcript's JSON)")
    try:
        return parse_dump(lines[-1])
    except DumpError as exc:
        return Transcript(integrity_error=f"dump: {exc}")
