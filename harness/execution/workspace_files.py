"""What a case's workspace holds, read without ever leaving it: the files the verdict compares."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from crashmatrix.harness.execution.trees import walk

# A workspace file larger than this is shown by its size: the invariants compare small text files
# (a CHANGELOG), and an agent that writes gigabytes must not take the harness's memory with it.
MAX_FILE_BYTES = 1 << 20


def snapshot(root: Path) -> dict[str, str]:
    """Relative path -> content for every entry under `root`, in sorted order.

    Nothing is followed: a symlink is recorded as its target (`symlink -> TARGET`), so a link an
    agent left to a file outside the workspace is neither read nor printed by `repro`, and a
    link where a file should be does not pass for that file. FIFOs, sockets and devices are
    recorded by kind, never opened (reading a FIFO blocks).
    """
    files: dict[str, str] = {}
    if not root.is_dir() or root.is_symlink():
        return files
    # Plain string paths: this runs at the start and end of every case, and pathlib's joins and
    # relative_to were most of its cost.
    base = os.fspath(root)
    for dirpath, dirnames, filenames in walk(base):
        prefix = dirpath[len(base) + 1:].replace(os.sep, "/")
        # walk lists a symlink to a directory among the files and does not descend into it.
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            rel = f"{prefix}/{name}" if prefix else name
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                files[rel] = f"symlink -> {os.readlink(path)}"
            elif stat.S_ISREG(info.st_mode):
                files[rel] = _read(path, info.st_size, info.st_mode)
            elif stat.S_ISDIR(info.st_mode):
                # A directory its owner cannot list (a tool's `chmod 000`) is skipped by the walk:
                # say it is there, so a verdict does not read it as missing.
                if info.st_mode & 0o500 != 0o500 and not _listable(path):
                    files[rel] = f"<directory, mode {stat.S_IMODE(info.st_mode):04o}: not readable>"
            else:
                files[rel] = f"<{_kind(info.st_mode)}: not read>"
    return dict(sorted(files.items()))


def _read(path: str, size: int, mode: int) -> str:
    if size > MAX_FILE_BYTES:
        return f"<{size} bytes: larger than {MAX_FILE_BYTES}, not read>"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:  # newlines as read_text gave them
            return f.read()
    except PermissionError:
        # A tool's `chmod 000` (the harness runs as a normal user): a fact about the file,
        # not the harness's failure.
        return f"<{size} bytes, mode {stat.S_IMODE(mode):04o}: not readable>"


def _listable(path: str) -> bool:
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_DIRECTORY))
    except OSError:
        return False
    return True


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"
