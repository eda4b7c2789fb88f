"""What a power loss leaves of a folder, from an incarnation's file-system calls and the folder before. Pure.

The model is the strict one crash-consistency testers (ALICE, CrashMonkey) start from: nothing
reaches the disk unless a sync put it there.

- A file's bytes are as of its last successful `fsync`/`fdatasync`. Its content then is known
  either as bytes (the tree before the incarnation, or empty for a file it created) or as a
  prefix of the file's final content, which holds as long as every later change only appended
  (a write at or past that length, or a truncate that kept it); a later write below it, or a
  truncate into it, makes the synced content unknowable from the final file: the file is then
  *unmodelled*, left as it is and named in the notes (never silently called synced).
- A name (create, rename, unlink, mkdir) is as of the last `fsync` of its directory: a file
  created since, in a directory not synced after, vanishes; a rename not followed by a sync of
  its directory is undone (the old name gets its old file back, the new one its old file or
  nothing); an unlink not synced is undone.
- The tree before the incarnation is taken as on disk (earlier incarnations were killed, not
  powered off: their page cache reached the disk before this one started).
- `keep`: the first `keep` unsynced writes of the store file reach the disk after all: the "torn
  at a write boundary" variants. The store file is the one the incarnation wrote last: the power
  goes at a commit boundary, just after the commit's own write. Not the first unsynced writes
  over all files: every incarnation first writes its lock's holder record, never synced, so
  that one would always be the write kept, and the log never torn. A kept write extends the
  file's synced content when it appends to it; one that does not is not kept.

- `names_now`: the other order a file system may persist things in: every name change the
  incarnation made (a create, a rename, an unlink) reached the disk, though its folder was not
  synced since, while the data stays as of each file's last sync. A file renamed into place
  before its bytes were synced is then there, holding what was synced of it (for a new file:
  nothing): the zero-length file some file systems leave after a power loss.

- `blocks`: the file's length reached the disk before its data, block by block: a file that
  grew since its last sync keeps its new length, and of what it gained only the last 4 KiB block
  reached the disk; the blocks before it read as zeros (a hole). A commit that crossed a block
  boundary is then a complete line whose head is NUL bytes. Names are as in the strict model.

- `mask`: any subset of the unsynced 4 KiB blocks reached the disk, not only a prefix: a page
  cache writes dirty pages back whole, in any order, and a file's new length may be stored with
  a later block while an earlier one never was (ALICE's "append reordering", at the block
  granularity CrashMonkey replays). Bit i of the mask ('1' kept, '0' dropped) is the i-th of
  the blocks, ordered by the first write into each: a kept block holds its final bytes, a
  dropped one before the last kept one holds what its last sync left (zeros past the synced
  length), and dropped blocks past the last kept one are cut off. Two writes into one block are
  kept or lost together: no state splits a block. The blocks a mask ranges over are those the
  appends, past its synced length, to a file whose name is durable and whose content is
  modelled dirtied (every other write is dropped, as in the strict model): a write in place or
  to a file the model cannot follow has no "kept" that the final file could show. Names are as
  in the strict model.

Files the calls never touched are not in the result: they are left as they are (another
process's files, e.g. an inbox item its sender synced).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from crashmatrix.harness.records.fs_calls import FsCall, Syscall
from crashmatrix.harness.records.tree_image import TreeImage

# The unit a file system writes data in: `blocks` keeps or loses whole 4 KiB blocks.
BLOCK = 4096


class MaskMismatch(ValueError):
    """A mask whose length is not the number of writes it ranges over: the run differs from the
    one the mask was enumerated from."""


class TargetKind(StrEnum):
    ABSENT = "absent"  # the name is gone (a folder: with everything in it)
    BYTES = "bytes"  # a file holding exactly `data`
    PREFIX = "prefix"  # a file holding the first `length` bytes of `source`'s final content
    DIR = "dir"  # a folder
    UNMODELLED = "unmodelled"  # left as it is: why, in `why`


@dataclass(frozen=True)
class Target:
    kind: TargetKind
    data: bytes | None = None
    source: str | None = None
    length: int | None = None  # PREFIX: None for the whole of `source`
    why: str | None = None
    holes: tuple[tuple[int, int], ...] = ()  # PREFIX: (start, end) ranges read as zeros


@dataclass(frozen=True)
class PowerState:
    """The tree after the power loss: a target for every path the calls touched, and notes, one
    line per change from the final tree (relative to the root), for the case's record."""

    targets: dict[str, Target]
    notes: list[str] = field(default_factory=list)
    # How many unsynced blocks a `mask` ranges over (`_subset_blocks`), whatever was asked.
    subset_blocks: int = 0

    @property
    def unmodelled(self) -> list[str]:
        return [p for p, t in self.targets.items() if t.kind is TargetKind.UNMODELLED]


@dataclass
class _Inode:
    number: int
    is_dir: bool = False
    size: int = 0
    # The synced content: `data` when known as bytes; else the first `length` bytes of the final
    # content, while `intact`. `foreign`: a file the tree did not show, opened, never created
    # here: another process's, taken as its writer left (and synced) it.
    data: bytes | None = b""
    length: int = 0
    intact: bool = True
    foreign: bool = False
    created: bool = False  # made by this incarnation: its bytes "before" are none
    broken: str | None = None  # why the synced content cannot be told
    pending: list[tuple[int, int, int]] = field(default_factory=list)  # (order, offset, count) since sync


@dataclass
class _Open:
    inode: int
    append: bool
    position: int | None = 0


class _Model:
    def __init__(self, before: TreeImage) -> None:
        self.root = before.root
        self.inodes: dict[int, _Inode] = {}
        self.current: dict[str, int] = {}  # path -> inode, now
        self.durable: dict[str, int | None] = {}  # path -> inode, as of its directory's last sync
        self.fds: dict[tuple[int, int], _Open] = {}
        self.order = 0  # writes seen
        self.last_written: int | None = None  # the inode of the last write: the store file
        self.notes: list[str] = []
        if before.exists:
            for d in sorted(before.dirs | {before.root}):
                self._bind(d, self._new(is_dir=True), durable=True)
            for path, data in before.files.items():
                inode = self._new()
                inode.data, inode.size, inode.length = data, len(data), len(data)
                self._bind(path, inode, durable=True)

    def _new(self, *, is_dir: bool = False) -> _Inode:
        inode = _Inode(len(self.inodes) + 1, is_dir=is_dir)
        self.inodes[inode.number] = inode
        return inode

    def _bind(self, path: str, inode: _Inode, *, durable: bool = False) -> None:
        self.current[path] = inode.number
        if durable:
            self.durable[path] = inode.number

    def scoped(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + "/")

    def _inode_at(self, path: str, *, create_foreign: bool) -> _Inode | None:
        number = self.current.get(path)
        if number is not None:
            return self.inodes[number]
        if not create_foreign or not self.scoped(path):
            return None
        inode = self._new()
        inode.data, inode.foreign = None, True
        self._bind(path, inode, durable=True)
        return inode

    def _rel(self, path: str) -> str:
        return os.path.relpath(path, os.path.dirname(self.root))

    def apply(self, call: FsCall) -> None:
        S = Syscall
        if not call.ok:
            if call.result is None and call.syscall in (S.WRITE, S.WRITEV, S.PWRITE64) and call.paths \
                    and self.scoped(call.paths[0]):
                self.notes.append(f"{self._rel(call.paths[0])}: the process died inside a "
                                  f"{call.syscall}; what it wrote is taken as unsynced")
            return
        path = call.paths[0] if call.paths else None
        if call.syscall in (S.OPEN, S.OPENAT, S.CREAT):
            self._open(call)
        elif call.syscall in (S.WRITE, S.WRITEV, S.PWRITE64):
            self._write(call)
        elif call.syscall is S.LSEEK and call.fd is not None:
            opened = self.fds.get((call.pid, call.fd))
            if opened is not None:
                opened.position = call.result
        elif call.syscall in (S.FTRUNCATE, S.TRUNCATE) and path is not None and call.number is not None:
            inode = self._inode_at(path, create_foreign=True)
            if inode is not None:
                self._truncate(inode, call.number)
        elif call.syscall in (S.FSYNC, S.FDATASYNC) and path is not None:
            self._sync(path)
        elif call.syscall in (S.RENAME, S.RENAMEAT, S.RENAMEAT2) and len(call.paths) == 2:
            self._rename(*call.paths, exchange="RENAME_EXCHANGE" in call.flags)
        elif call.syscall in (S.UNLINK, S.UNLINKAT) and path is not None:
            self.current.pop(path, None)
        elif call.syscall in (S.MKDIR, S.MKDIRAT) and path is not None and self.scoped(path):
            self._bind(path, self._new(is_dir=True))
        elif call.syscall is S.CLOSE and call.fd is not None:
            self.fds.pop((call.pid, call.fd), None)

    def _open(self, call: FsCall) -> None:
        path = call.paths[0]
        if not self.scoped(path) or call.result is None:
            return
        inode = self._inode_at(path, create_foreign=False)
        if inode is None:
            if "O_CREAT" in call.flags:
                inode = self._new()
                inode.created = True
                self._bind(path, inode)
            else:
                inode = self._inode_at(path, create_foreign=True)
                assert inode is not None
        elif "O_TRUNC" in call.flags and not inode.is_dir:
            self._truncate(inode, 0)
        self.fds[(call.pid, call.result)] = _Open(inode.number, "O_APPEND" in call.flags)

    def _write(self, call: FsCall) -> None:
        if not call.paths or not self.scoped(call.paths[0]) or not call.result:
            return
        inode = self._inode_at(call.paths[0], create_foreign=True)
        if inode is None or inode.is_dir:
            return
        self.last_written = inode.number
        opened = self.fds.get((call.pid, call.fd)) if call.fd is not None else None
        offset: int | None
        if call.syscall is Syscall.PWRITE64:
            offset = call.number
        elif opened is None:
            offset = None  # an fd opened before the trace began, or by a process not followed
        elif opened.append:
            offset = inode.size
        else:
            offset = opened.position
            opened.position = None if offset is None else offset + call.result
        self.order += 1
        if offset is None:
            self._break(inode, "a write at an offset the trace does not show")
            return
        if inode.foreign:
            self._break(inode, "a file this incarnation did not create, written and not synced")
        elif offset < inode.length:
            inode.intact = False
        inode.size = max(inode.size, offset + call.result)
        inode.pending.append((self.order, offset, call.result))

    def _truncate(self, inode: _Inode, length: int) -> None:
        if inode.foreign:
            self._break(inode, "a file this incarnation did not create, truncated and not synced")
        elif length < inode.length:
            inode.intact = False
        inode.size = length
        # A write past the new end no longer holds what it wrote: it cannot be kept as written.
        inode.pending = [(o, off, n) for o, off, n in inode.pending if off + n <= length]

    @staticmethod
    def _break(inode: _Inode, why: str) -> None:
        if inode.data is None:  # known bytes stay known, whatever happens after them
            inode.broken = inode.broken or why

    def _sync(self, path: str) -> None:
        number = self.current.get(path)
        if number is not None and not self.inodes[number].is_dir:
            inode = self.inodes[number]
            inode.data, inode.length, inode.intact = None, inode.size, True
            inode.foreign, inode.broken, inode.pending = False, None, []
            return
        # A directory (in the tree or above it): every name in it is now as it is now.
        for name in {*self.current, *self.durable}:
            if os.path.dirname(name) == path:
                self.durable[name] = self.current.get(name)

    def _rename(self, old: str, new: str, *, exchange: bool) -> None:
        if not (self.scoped(old) or self.scoped(new)):
            return
        moving = self._inode_at(old, create_foreign=True) if self.scoped(old) else None
        if moving is None:  # moved in from outside the tree: another process's file
            moving = self._new()
            moving.data, moving.foreign = None, True
        if moving.is_dir and any(p.startswith(old + "/") for p in self.current):
            self.notes.append(f"{self._rel(old)}: a folder renamed with files in it; the files keep "
                              "their old names in this model")
        replaced = self.current.get(new)
        self.current.pop(old, None)
        if exchange and replaced is not None:
            self.current[old] = replaced
        if self.scoped(new):
            self.current[new] = moving.number

    def state(self, keep: int, names_now: bool = False, blocks: bool = False,
              mask: str | None = None) -> PowerState:
        # A foreign path with paths under it is another process's directory (the inbox the
        # harness delivered into while the agent ran), not a file: it holds no bytes, and what
        # lies in it is judged path by path (issue 33, P1).
        for path, number in self.current.items():
            inode = self.inodes[number]
            if inode.foreign and not inode.is_dir and any(p.startswith(path + "/") for p in self.current):
                inode.is_dir = True
        kept = self._kept(keep)
        units = self._subset_blocks()
        if mask is not None and len(mask) != len(units):
            raise MaskMismatch(f"mask {mask} names {len(mask)} unsynced blocks; this run left "
                               f"{len(units)} that a subset may keep")
        if mask is not None and set(mask) - {"0", "1"}:
            raise MaskMismatch(f"mask {mask} is not made of 0 and 1")
        subset = self._subset(units, mask) if mask is not None else {}
        if names_now:  # every name as the incarnation left it (see the module)
            self.durable = {p: self.current.get(p) for p in {*self.current, *self.durable}}
        targets: dict[str, Target] = {}
        notes = list(self.notes)
        where = {number: path for path, number in self.current.items()}
        for path in sorted({*self.current, *self.durable}):
            if not self.scoped(path):
                continue
            now, then = self.current.get(path), self.durable.get(path)
            rel = self._rel(path)
            if then is None or not self._durable_parents(path):
                if now is not None:
                    targets[path] = Target(TargetKind.ABSENT)
                    notes.append(f"{rel}: gone (its name was never synced to its folder)"
                                 if self.durable.get(path) is None else f"{rel}: gone with its folder")
                continue
            inode = self.inodes[then]
            if inode.is_dir:
                targets[path] = Target(TargetKind.DIR)
                continue
            final = where.get(then)
            grown = self._grown(inode, final, rel) if blocks else None
            if then in subset and final is not None:
                grown = self._masked(inode, final, subset[then], rel)
            target, note = grown or self._content(inode, final, kept.get(then, 0), rel)
            targets[path] = target
            if then != now:
                notes.append(f"{rel}: its name holds the file it held at its folder's last sync "
                             "(a rename or unlink not synced is undone)")
            if note:
                notes.append(note)
        return PowerState(targets, notes, len(units))

    def _subset_blocks(self) -> list[tuple[int, int, int]]:
        """(order, inode, block) of each unsynced block a mask ranges over: the 4 KiB blocks that
        the appends past the synced length of a modelled file with a durable name dirtied,
        ordered by the first write into each (then by place in the file)."""
        named = {number for path, number in self.durable.items()
                 if number is not None and self.scoped(path) and self._durable_parents(path)}
        finals = set(self.current.values())
        blocks: dict[tuple[int, int], int] = {}
        for number in sorted(named & finals):
            inode = self.inodes[number]
            if inode.is_dir or inode.broken or inode.foreign or not inode.intact or not inode.pending:
                continue
            end = inode.length
            for _, offset, count in sorted(inode.pending):
                if offset != end:
                    break  # not one append after another: no subset of them is a file
                end += count
            else:
                if end == inode.size:
                    for order, offset, count in inode.pending:
                        for block in range(offset // BLOCK, (offset + count - 1) // BLOCK + 1):
                            blocks.setdefault((number, block), order)
        return sorted((order, number, block) for (number, block), order in blocks.items())

    @staticmethod
    def _subset(blocks: list[tuple[int, int, int]], mask: str) -> dict[int, list[tuple[int, bool]]]:
        """Inode -> its unsynced blocks as (block, kept), in file order."""
        out: dict[int, list[tuple[int, bool]]] = {}
        for (_, number, block), bit in zip(blocks, mask, strict=True):
            out.setdefault(number, []).append((block, bit == "1"))
        return {number: sorted(found) for number, found in out.items()}

    def _masked(self, inode: _Inode, final: str, blocks: list[tuple[int, bool]],
                rel: str) -> tuple[Target, str]:
        """The file with its kept blocks on disk as written, its dropped ones before the last
        kept one as of its last sync (zeros past its synced length), those after it gone."""
        def span(block: int) -> tuple[int, int]:  # the block's unsynced bytes
            return max(inode.length, block * BLOCK), min(inode.size, (block + 1) * BLOCK)

        length = max((span(b)[1] for b, keep in blocks if keep), default=inode.length)
        holes = tuple(span(b) for b, keep in blocks if not keep and span(b)[1] <= length)
        shown = "".join("1" if keep else "0" for _, keep in blocks)
        zeros = "".join(f", bytes {a} to {b} zeros" for a, b in holes)
        return (Target(TargetKind.PREFIX, source=final, length=length, holes=holes),
                f"{rel}: kept {length} of {inode.size} bytes: of its {len(blocks)} unsynced "
                f"block(s), those marked 1 in {shown} reached the disk{zeros}")

    def _durable_parents(self, path: str) -> bool:
        parent = os.path.dirname(path)
        while self.scoped(parent):
            number = self.durable.get(parent)
            if number is None or not self.inodes[number].is_dir:
                return False
            parent = os.path.dirname(parent)
        return True

    def _grown(self, inode: _Inode, final: str | None, rel: str) -> tuple[Target, str] | None:
        """`blocks`: a file that only grew since its last sync, with its new length and only the
        last block of what it gained (None: it did not grow, or not only by appending)."""
        if final is None or inode.broken or inode.foreign or not inode.intact or inode.size <= inode.length:
            return None
        last = max(inode.length, (inode.size - 1) // BLOCK * BLOCK)
        if last == inode.length:
            return (Target(TargetKind.PREFIX, source=final, length=inode.size),
                    f"{rel}: kept its {inode.size} bytes (what it gained since its last sync fits its last "
                    "block, which reached the disk)")
        return (Target(TargetKind.PREFIX, source=final, length=inode.size, holes=((inode.length, last),)),
                f"{rel}: kept its length, {inode.size} bytes, with bytes {inode.length} to {last} "
                "zeros (its length reached the disk before those blocks)")

    def _kept(self, keep: int) -> dict[int, int]:
        """Inode -> bytes appended past its synced length by the store file's first `keep`
        unsynced writes (the store file: the last one written)."""
        if not keep or self.last_written is None:
            return {}
        inode = self.inodes[self.last_written]
        if not inode.intact or inode.broken:
            return {}
        extra = 0
        for _, offset, count in sorted(inode.pending)[:keep]:
            if offset != inode.length + extra:
                break  # not an append to what is kept: nothing after it can be either
            extra += count
        return {inode.number: extra} if extra else {}

    def _content(self, inode: _Inode, final: str | None, extra: int,
                 rel: str) -> tuple[Target, str | None]:
        if inode.broken:
            return Target(TargetKind.UNMODELLED, why=inode.broken), f"{rel}: left as it is: {inode.broken}"
        if inode.foreign:
            if final is None:
                return Target(TargetKind.UNMODELLED, why="another process's file, renamed away"), None
            return Target(TargetKind.PREFIX, source=final), None
        unsynced = inode.size - inode.length
        if extra and final is not None:
            return (Target(TargetKind.PREFIX, source=final, length=inode.length + extra),
                    f"{rel}: kept {inode.length + extra} of {inode.size} bytes ({extra} unsynced kept)")
        if inode.data is not None:
            changed = inode.pending or inode.size != len(inode.data)
            if inode.created:
                return Target(TargetKind.BYTES, data=inode.data), (
                    f"{rel}: empty (created by this incarnation, none of its bytes synced)"
                    if changed else None)
            return Target(TargetKind.BYTES, data=inode.data), (
                f"{rel}: back to its {len(inode.data)} bytes before this incarnation "
                "(nothing of it synced since)" if changed else None)
        if final is None:
            why = "unlinked or replaced after its last sync: its synced bytes cannot be read"
            return Target(TargetKind.UNMODELLED, why=why), f"{rel}: left as it is: {why}"
        if not inode.intact:
            why = "rewritten below its synced length after its last sync"
            return Target(TargetKind.UNMODELLED, why=why), f"{rel}: left as it is: {why}"
        return Target(TargetKind.PREFIX, source=final, length=inode.length), (
            f"{rel}: cut back to {inode.length} of {inode.size} bytes (its last sync)" if unsynced else None)


def power_state(calls: Sequence[FsCall], before: TreeImage, keep: int = 0,
                names_now: bool = False, blocks: bool = False, mask: str | None = None) -> PowerState:
    """The tree under `before.root` after a power loss at the end of `calls`: see the module.
    Raises MaskMismatch for a mask of another length than `subset_blocks`, or not of 0 and 1."""
    model = _Model(before)
    for call in calls:
        model.apply(call)
    return model.state(keep, names_now, blocks, mask)
