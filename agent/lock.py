"""The session's exclusive lock: one writer per session, and a clear error naming the holder."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import sys
import time
from pathlib import Path


class SessionLocked(RuntimeError):
    """Another process holds the session; its identity is in the message."""


class SessionLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe_holder(fd)
            os.close(fd)
            raise SessionLocked(
                f"session {self.path.parent} is locked by {holder}; "
                "only one process may write a session at a time"
            ) from None
        # Written after the lock is ours, so a reader that fails to lock sees the live holder.
        info = {"pid": os.getpid(), "command": _command_line(), "since": round(time.time(), 3)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None


# The whole command line names the holder (its session, its task); the bound keeps the record
# inside the one read that describes it, whatever a task's length.
_COMMAND_MAX = 1000


def _command_line() -> str:
    command = shlex.join(sys.argv)
    return command if len(command) <= _COMMAND_MAX else command[:_COMMAND_MAX] + "..."


def _describe_holder(fd: int) -> str:
    try:
        raw = os.pread(fd, 8 * _COMMAND_MAX, 0)  # JSON escapes may take 6 bytes a character
        info = json.loads(raw)
        command = info.get("command") or " ".join(str(a) for a in info.get("argv", []))
        return f"pid {info['pid']} ({command})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (holder unknown)"
