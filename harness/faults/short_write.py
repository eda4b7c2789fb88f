"""What a short write leaves in an append-only file: the prefix its call wrote, put where it landed. Pure.

strace can make a call return a count only by not making it (`retval=N`: the call is skipped),
and it cannot change a call's arguments, so it cannot make the kernel write a prefix. So the
`short-write` fault has the call skipped with a short count, and afterwards puts back the bytes
the kernel would have written: the call's first N bytes (strace prints a write's buffer, up to
its `-s`), at the offset the write would have landed at. For an append (O_APPEND, as a log is
written) every later append landed N bytes further on, so the prefix is inserted there, and
the file is then byte for byte what a real short write would have left, whatever the agent did
after it: wrote the rest (the file is whole), took the write for complete (a commit cut short,
the next appended to it), or wrote the whole buffer again (the prefix twice).

The cost: while the incarnation runs, the file lacks the prefix (an agent reading its store back
in the same incarnation would read it without); what later incarnations and the verdict read is
exact. Anything but appends on the file after the short call (a positioned write, a truncate)
cannot be followed: the file is left as the incarnation left it, and the case says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crashmatrix.harness.records.fs_calls import FsCall, Syscall

_OPENS = (Syscall.OPEN, Syscall.OPENAT, Syscall.CREAT)


@dataclass(frozen=True)
class Prefix:
    """The bytes a short write wrote and where they go in the file the incarnation left."""

    offset: int
    data: bytes
    asked: int  # the bytes the call was asked to write


@dataclass(frozen=True)
class Unmodelled:
    why: str


def short_write(calls: Sequence[FsCall], path: str, size: int) -> Prefix | Unmodelled | None:
    """The injected short write on `path` (`size` bytes before the calls) among `calls`, as a
    `Prefix` to put back; None when no write on it was injected (or one returned 0: nothing
    written, nothing to put back)."""
    append: dict[tuple[int, int], bool] = {}  # (pid, fd) -> opened with O_APPEND
    found: Prefix | None = None
    for call in calls:
        if not call.paths or call.paths[0] != path:
            continue
        if call.syscall in _OPENS and call.ok:
            append[(call.pid, call.result or 0)] = "O_APPEND" in call.flags
            if "O_TRUNC" in call.flags:
                if found is not None:
                    return Unmodelled("the file was truncated after the short write")
                size = 0
        elif call.syscall in (Syscall.FTRUNCATE, Syscall.TRUNCATE) and call.ok:
            if found is not None:
                return Unmodelled("the file was truncated after the short write")
            size = call.number if call.number is not None else size
        elif call.syscall in (Syscall.WRITE, Syscall.WRITEV, Syscall.PWRITE64) and call.ok:
            appends = call.syscall is not Syscall.PWRITE64 and append.get((call.pid, call.fd or -1), False)
            if call.injected and call.result:
                if not appends:
                    return Unmodelled("the short write was not an append")
                head = call.head or b""
                # A count at or past the bytes asked (a write shorter than the short count) is a
                # whole write: the kernel would have written them all.
                wrote = call.result if call.number is None else min(call.result, call.number)
                if wrote > len(head):
                    return Unmodelled(f"the short write returned {call.result} bytes, of which "
                                      f"strace showed {len(head)}")
                found = Prefix(size, head[:wrote], call.number if call.number is not None else wrote)
                continue
            if appends:
                size += call.result or 0
            elif found is not None:
                return Unmodelled(f"a {call.syscall} not at the end followed the short write")
            elif call.syscall is Syscall.PWRITE64 and call.number is not None:
                size = max(size, call.number + (call.result or 0))  # its offset is its argument
            else:
                return Unmodelled("a write at an offset the trace does not show")
    return found


def put_back(data: bytes, prefix: Prefix) -> bytes:
    """`data` (the file as the incarnation left it) with the short write's prefix where it landed."""
    return data[:prefix.offset] + prefix.data + data[prefix.offset:]
