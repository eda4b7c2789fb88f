"""One writer per `--out`: a command that writes there holds an exclusive lock until it exits."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from crashmatrix.harness.cli.exitcodes import fail

LOCK_FILE = ".crashmatrix.lock"  # beside the results; holds the writer's pid, for the message
_held: list[int] = []  # open descriptors: a lock lives as long as its descriptor, so to the exit


def lock_out(out_dir: Path) -> None:
    """Take `out_dir` for this process, or exit 2 naming the run that holds it. Two runs into one
    --out would interleave their results and each overwrite the other's run.json; the second is
    refused before it touches anything. The kernel drops the lock when this process ends, however
    it ends (a SIGKILL too), so a stale lock file never blocks a later run."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = ""
        with contextlib.suppress(OSError):
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        fail(f"--out {out_dir}: another crashmatrix command is writing there (pid {holder or '?'}); "
             "wait for it to end, or choose another --out")
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    _held.append(fd)

