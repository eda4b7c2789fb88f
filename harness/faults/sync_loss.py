"""What the disk holds of a file after a failed fsync: the writes it was to make durable are lost. Pure.

The PostgreSQL fsync lesson: when writeback fails, Linux reports the error to one fsync and marks
the pages clean; their bytes never reach the disk, and a later fsync that succeeds does not bring
them back. So the writes made since the file's last successful sync, when a sync fails, are lost
for good: their range reads as zeros when later writes put the file's end past them (the size
was synced, their blocks were not), and the file ends before them otherwise. Writes after the
failure stay as written (no power loss here: the page cache keeps them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crashmatrix.harness.records.fs_calls import FsCall, Syscall

_WRITES = (Syscall.WRITE, Syscall.WRITEV, Syscall.PWRITE64)
_SYNCS = (Syscall.FSYNC, Syscall.FDATASYNC)


@dataclass(frozen=True)
class SyncLoss:
    length: int  # the file's length on disk
    holes: tuple[tuple[int, int], ...]  # (offset, count): bytes lost inside that length, as zeros
    failed_syncs: int

    @property
    def changes(self) -> bool:
        return self.failed_syncs > 0


def sync_loss(calls: Sequence[FsCall], path: str, size: int) -> SyncLoss:
    """The file `path` (`size` bytes before the calls) as the disk holds it after `calls`."""
    pending: list[tuple[int, int]] = []  # written since the last successful sync
    lost: list[tuple[int, int]] = []
    append: dict[tuple[int, int], bool] = {}  # (pid, fd) -> opened with O_APPEND
    failed = 0
    for call in calls:
        if not call.paths or call.paths[0] != path:
            continue
        if call.syscall in (Syscall.OPEN, Syscall.OPENAT, Syscall.CREAT) and call.ok:
            append[(call.pid, call.result or 0)] = "O_APPEND" in call.flags
            if "O_TRUNC" in call.flags:
                size, pending, lost = 0, [], []
        elif call.syscall in _WRITES and call.ok and call.result:
            # Appends land at the end; the store is an append-only log. A pwrite says its offset.
            offset = call.number if call.syscall is Syscall.PWRITE64 and call.number is not None else size
            pending.append((offset, call.result))
            size = max(size, offset + call.result)
        elif call.syscall in (Syscall.FTRUNCATE, Syscall.TRUNCATE) and call.ok and call.number is not None:
            size = call.number
            pending = [(o, min(n, size - o)) for o, n in pending if o < size]
            lost = [(o, min(n, size - o)) for o, n in lost if o < size]
        elif call.syscall in _SYNCS and call.error is not None:
            failed += 1
            lost += pending
            pending = []
        elif call.syscall in _SYNCS and call.ok:
            pending = []
    holes = sorted(lost)
    length = size
    # A lost range at the end: nothing later put the file's end past it, so the file ends before it.
    while holes and holes[-1][0] + holes[-1][1] >= length:
        length = min(length, holes.pop()[0])
    return SyncLoss(length, tuple(h for h in holes if h[0] < length), failed)


def lose(data: bytes, loss: SyncLoss) -> bytes:
    """`data` (the file as the incarnation left it) as the disk holds it."""
    out = bytearray(data[:loss.length])
    for offset, count in loss.holes:
        end = min(offset + count, len(out))
        out[offset:end] = bytes(end - offset)
    return bytes(out)
