"""What `--audit-states` compares of a case tree: each path's kind, mode and bytes, read apart from snapshots.

The audit once compared counts (commits, requests, exit codes): a state that lost a FIFO the agent
had made gave the same counts as a real kill, and 16 cases saw "no such file" unnoticed. Here the
tree a crash state restores to is read from disk and set against the tree the agent had left when
the snapshot was taken, path by path, by a reader of its own (a bug in the snapshot's reader is not
repeated here). Not against the tree of the audit's real kill: that one is another run, and what
two runs write differs where nobody reads it (our agent's session.lock holds its pid and the time).

A file's bytes are hashed block by block, and a block that is a hole is not read (a 2 GB sparse
file costs nothing). The case directory's name, and the case key (that name and a random part, in
the fake provider's URL), are masked: the two trees are in different directories.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from pathlib import Path

from crashmatrix.harness.execution.states import TREE

BLOCK = 1 << 20


def contents(case_dir: Path) -> dict[str, str]:
    """Relative path -> `kind mode [size hash | target]` for everything under the case's session
    and workspace, links not followed, FIFOs and sockets never opened."""
    name = case_dir.name.encode()
    key, longest = re.compile(re.escape(name) + rb"(?:-[0-9a-f]{16})?"), len(name) + 17
    found: dict[str, str] = {}
    base = os.fspath(case_dir)
    stack = [(os.path.join(base, part), part) for part in reversed(TREE)]
    while stack:
        path, rel = stack.pop()
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        mode = info.st_mode
        head = f"{_kind(mode)} {stat.S_IMODE(mode):o}"
        if stat.S_ISDIR(mode):
            found[rel] = head
            try:
                names = sorted(os.listdir(path), reverse=True)
            except OSError as exc:
                found[rel] = f"{head} unlisted ({exc.strerror})"
                continue
            stack += [(os.path.join(path, n), f"{rel}/{n}") for n in names]
        elif stat.S_ISLNK(mode):
            target = key.sub(b"<case-dir>", os.readlink(path).encode(errors="surrogateescape"))
            found[rel] = f"{head} -> {target.decode(errors='replace')}"
        elif stat.S_ISREG(mode):
            found[rel] = f"{head} {info.st_size} {_digest(path, info.st_size, key, longest)}"
        else:
            found[rel] = head
    return found


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "dir"), (stat.S_ISREG, "file"), (stat.S_ISLNK, "link"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "device"


def _digest(path: str, size: int, key: re.Pattern[bytes], longest: int) -> str:
    """The file's bytes, hashed block by block, the case key overwritten where it occurs (with as
    many bytes: offsets stay, and both trees' names have one length). A block is read with the
    `longest` a key may be on either side, so a key across two blocks is masked in each. A run of
    all-zero blocks (a hole, not read, or zeros written) is hashed as its length alone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    h = hashlib.blake2b(digest_size=16)
    try:
        zeros, block, blocks = 0, 0, (size + BLOCK - 1) // BLOCK
        while block < blocks:
            skip = _next_data(fd, block * BLOCK, size) // BLOCK - block
            if skip > 0:  # whole blocks of hole: not read
                zeros, block = zeros + skip, block + skip
                continue
            start = block * BLOCK
            low = max(0, start - longest)
            window = key.sub(lambda m: b"#" * len(m.group()), os.pread(fd, BLOCK + 2 * longest, low))
            chunk = window[start - low:start - low + BLOCK]
            if chunk.count(0) == len(chunk):
                zeros += 1
            else:
                if zeros:
                    h.update(b"Z" + zeros.to_bytes(8, "big"))
                    zeros = 0
                h.update(b"D" + chunk)
            block += 1
        if zeros:
            h.update(b"Z" + zeros.to_bytes(8, "big"))
    finally:
        os.close(fd)
    return h.hexdigest()


def _next_data(fd: int, at: int, size: int) -> int:
    """The offset of the first data at or after `at` (`size` when only a hole is left); `at`
    itself where the platform cannot tell."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:
        return at
    try:
        return min(os.lseek(fd, at, seek_data), size)
    except OSError as exc:
        return size if exc.errno == errno.ENXIO else at
