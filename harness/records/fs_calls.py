"""The file-system calls of one incarnation, as observed from outside it (strace): one record per call."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Syscall(StrEnum):
    """The calls observed: those that change a file's bytes, its name or its durability."""

    OPEN = "open"
    OPENAT = "openat"
    CREAT = "creat"
    WRITE = "write"
    WRITEV = "writev"
    PWRITE64 = "pwrite64"
    LSEEK = "lseek"  # only for the offset a later write() lands at
    FTRUNCATE = "ftruncate"
    TRUNCATE = "truncate"
    FSYNC = "fsync"
    FDATASYNC = "fdatasync"
    RENAME = "rename"
    RENAMEAT = "renameat"
    RENAMEAT2 = "renameat2"
    UNLINK = "unlink"
    UNLINKAT = "unlinkat"
    MKDIR = "mkdir"
    MKDIRAT = "mkdirat"
    CLOSE = "close"


@dataclass(frozen=True)
class FsCall:
    """One call. `paths`: absolute where the tracer could resolve them: the file an fd names (for
    calls on an fd), the path opened (open: the fd's path when it succeeded), or (old, new) for a
    rename. `number`: the call's length or offset argument (write: bytes asked; pwrite64 and
    lseek: the offset; ftruncate and truncate: the new length). `result`: the return value (bytes
    written, the fd opened, the offset reached); None when the process died inside the call."""

    pid: int
    syscall: Syscall
    paths: tuple[str, ...]
    fd: int | None = None  # the fd argument, or the fd an open returned
    flags: frozenset[str] = frozenset()  # O_* flags of an open (O_CREAT, O_APPEND, O_TRUNC, ...)
    number: int | None = None
    result: int | None = None
    error: str | None = None  # the errno name (ENOENT, EIO, ...) of a failed call
    # A call given a path (an open, rename, unlink, truncate) by a relative path: strace's `-P`
    # matches such a call by the path as given, so a kill there cannot be aimed at the file
    # (black-box makes no crash point of it).
    relative: bool = False
    # strace tampered with the call (`(INJECTED)`, fs_inject): it did not run; `result` and
    # `error` are what strace made it return.
    injected: bool = False
    # write, pwrite64: the first bytes of the buffer, as far as strace printed it (its `-s`).
    # Evidence, not identity: two calls that differ only here are the same call.
    head: bytes | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None and self.result is not None and self.result >= 0
