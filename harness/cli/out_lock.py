"""One writer per `--out`: a command that writes there holds an exclusive lock until it exits."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from crashmatrix.harness.cli.exitcodes import fail

# Beside the results, created once and never written: a refused command leaves --out as it was.
LOCK_FILE = ".crashmatrix.lock"
_held: list[int] = []  # open descriptors: a lock lives as long as its descriptor, so to the exit


def lock_out(out_dir: Path) -> None:
    """Take `out_dir` for this process, or exit 2 saying another command holds it. Two runs into one
    --out would interleave their results and each overwrite the other's run.json; the second is
    refused before it touches anything. The kernel drops the lock when this process ends, however
    it ends (a SIGKILL too), so a stale lock file never blocks a later run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        fail(f"--out {out_dir}: another crashmatrix command is writing there; wait for it to end, "
             "or choose another --out")
    _held.append(fd)

