"""Files as a crash state keeps them: their data extents (holes neither read nor written), FIFOs, sockets.

A sparse file is mostly holes: `truncate -s 2G` makes one that holds nothing. Read whole, it is 2 GB
in memory at every event, and written back whole it is 2 GB of tmpfs per case; read by its data
extents (SEEK_DATA / SEEK_HOLE), it is nothing, and written back extent by extent (holes skipped,
the size set last) it stays as sparse as the agent left it.

A FIFO and a socket hold no bytes, but an agent that made one finds it there after a real kill:
both are restored as nodes (see `make_node`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

from crashmatrix.harness.execution.snapshot_limits import Limits, Refusal, Refused, sized

Extent = tuple[int, bytes]  # an offset in the file, and the data there


class Data:
    """A regular file's content: its size, and the extents that hold data. A hole reads as
    zeros and is not kept. Immutable; its digest with a directory name masked is computed once
    (an unchanged file is one object from event to event, `read_data`'s `same`)."""

    __slots__ = ("_digests", "extents", "held", "size")

    def __init__(self, size: int, extents: tuple[Extent, ...]) -> None:
        self.size = size
        self.extents = extents
        self.held = sum(len(chunk) for _, chunk in extents)
        self._digests: dict[bytes, bytes] = {}

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return isinstance(other, Data) and self.size == other.size and self.extents == other.extents

    def __hash__(self) -> int:
        return hash((self.size, self.extents))

    def digest(self, masked: bytes, mask: bytes) -> bytes:
        """Size and extents, `masked` replaced by `mask` in each extent. A directory name has no
        NUL in it, and extents are separated by holes (zeros), so no occurrence spans two."""
        found = self._digests.get(masked)
        if found is None:
            h = hashlib.sha256(self.size.to_bytes(8, "big"))
            for offset, chunk in self.extents:
                content = chunk.replace(masked, mask)
                h.update(offset.to_bytes(8, "big") + len(content).to_bytes(8, "big") + content)
            found = self._digests[masked] = h.digest()
        return found


def read_data(path: str, rel: str, limits: Limits, used: int, same: Data | None = None) -> Data:
    """The data of regular file `path` (`rel` in the tree), holes skipped. Refused, before any of
    it is read, when it holds more than one file may, or more than is left of what the state may
    hold once `used` bytes are. `same`: what the file held at the previous event, returned
    instead when equal (so the state shares it, and its digest)."""
    try:
        # O_NONBLOCK: a file swapped for a FIFO since it was listed would block the open.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise Refused(Refusal.UNREADABLE, f"{rel}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(Refusal.UNREADABLE, f"{rel}: changed while it was read")
        spans = _data_spans(fd, info.st_size)
        held = sum(end - start for start, end in spans)
        if held > limits.file_bytes:
            raise Refused(Refusal.FILE, f"{rel} holds {sized(held)} of data, over the "
                                        f"{sized(limits.file_bytes)} bound on one file")
        if used + held > limits.tree_bytes:
            raise Refused(Refusal.TREE, f"its files hold at least {sized(used + held)} of data (counted up "
                                        f"to {rel}), over the {sized(limits.tree_bytes)} bound on one state")
        data = Data(info.st_size, tuple((start, _pread(fd, end - start, start)) for start, end in spans))
    finally:
        os.close(fd)
    return same if same is not None and same == data else data


def write_data(path: str, data: Data, before: bytes, after: bytes) -> None:
    """Write `data` as a new file at `path`, `before` rewritten to `after` (the same length)
    in every extent: each extent where it was, the holes left unwritten, the size set last."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        for offset, chunk in data.extents:
            view = memoryview(chunk.replace(before, after) if before != after else chunk)
            at = offset
            while view:
                n = os.pwrite(fd, view, at)
                view, at = view[n:], at + n
        os.ftruncate(fd, data.size)  # a hole at the end stays one
    finally:
        os.close(fd)


def make_node(path: str, mode: int) -> None:
    """Make a FIFO or a socket at `path` (permission bits set by the caller).

    A socket is made as a bare node (mknod, no privilege needed), bound by no process. That is
    what a real kill leaves: SIGKILL takes the agent's whole process group, so whatever listened
    on a socket in its tree is gone, and a connect is refused alike. A listener that escaped the
    group lives outside the case tree, which a state does not hold at all (the audit's real kills
    are there to catch such an agent)."""
    if stat.S_ISFIFO(mode):
        os.mkfifo(path, 0o600)
    elif stat.S_ISSOCK(mode):
        os.mknod(path, stat.S_IFSOCK | 0o600)
    else:
        raise ValueError(f"{path}: not a FIFO or a socket (mode {mode:o})")


def _data_spans(fd: int, size: int) -> list[tuple[int, int]]:
    """The [start, end) ranges of the file that hold data, by SEEK_DATA / SEEK_HOLE; the whole
    file where the platform or filesystem cannot tell."""
    if size == 0:
        return []
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return [(0, size)]
    spans: list[tuple[int, int]] = []
    at = 0
    while at < size:
        try:
            start = os.lseek(fd, at, seek_data)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a hole from `at` to the end
                break
            if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
                return [(0, size)]
            raise
        if start >= size:
            break
        end = min(os.lseek(fd, start, seek_hole), size)
        spans.append((start, end))
        at = end
    return spans


def _pread(fd: int, length: int, offset: int) -> bytes:
    """`length` bytes at `offset`, fewer only at the end of the file."""
    parts: list[bytes] = []
    while length > 0:
        chunk = os.pread(fd, min(length, 8 << 20), offset)
        if not chunk:
            break
        parts.append(chunk)
        length, offset = length - len(chunk), offset + len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)
