"""The session log: one atomic, checksummed, numbered commit per line of `session.jsonl`.

A line is `{"seq":N,"entries":[...],"crc":"xxxxxxxx"}` where the CRC-32 covers the exact bytes of
the line up to (not including) `,"crc"`, so checking it needs no re-serialisation. Opening
repairs a torn last line (an incomplete one, or one with the zero-filled hole a power loss
leaves) by truncating it and reports that it did; any other damage, a complete last line
included, is refused with the line number, because dropping it would lose acknowledged data.
"""

from __future__ import annotations

import errno
import json
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from crashmatrix.agent.probe import ProbeKind, probe
from crashmatrix.agent.records import Entry, commit_label

_CRC_SUFFIX_LEN = len(',"crc":"00000000"}')


class StorageFailed(OSError):
    """Writing or syncing a commit failed: the commit is not saved, and what the disk holds of it
    is unknown. After a failed fsync the kernel may have dropped the unsynced pages (marked clean),
    so a retried fsync can succeed with the data gone (PostgreSQL's fsync lesson): the log refuses
    every later commit, and the agent stops; a later `recover` re-reads the log from disk."""

    def __init__(self, path: Path, op: str, cause: OSError) -> None:
        name = errno.errorcode.get(cause.errno or 0, str(cause.errno))
        super().__init__(cause.errno, f"{op} of {path} failed: {name} ({cause.strerror or cause}); "
                         "the commit was not saved")
        self.path = path
        self.op = op


class LogCorrupt(RuntimeError):
    """The log is damaged somewhere other than its last line; nothing was changed."""

    def __init__(self, path: Path, line: int, why: str) -> None:
        super().__init__(f"{path}: line {line}: {why}; refusing to open (no data was changed)")
        self.path = path
        self.line = line
        self.why = why


@dataclass(frozen=True)
class Commit:
    seq: int
    entries: list[Entry]


@dataclass(frozen=True)
class TailRepair:
    """What opening the log dropped: a torn last line that was never acknowledged."""

    line: int
    dropped_bytes: int
    why: str


def encode_commit(seq: int, entries: list[Entry]) -> bytes:
    body = json.dumps({"seq": seq, "entries": entries}, ensure_ascii=False, separators=(",", ":"))
    head = body[:-1].encode()
    crc = zlib.crc32(head)
    return head + f',"crc":"{crc:08x}"}}\n'.encode()


def decode_line(raw: bytes, expected_seq: int) -> Commit:
    """Parse one complete line (without its newline); raises ValueError saying what is wrong."""
    if len(raw) <= _CRC_SUFFIX_LEN or not raw.startswith(b'{"seq":'):
        raise ValueError("not a commit line")
    head, suffix = raw[:-_CRC_SUFFIX_LEN], raw[-_CRC_SUFFIX_LEN:]
    if not (suffix.startswith(b',"crc":"') and suffix.endswith(b'"}')):
        raise ValueError("checksum field missing")
    want = suffix[8:16].decode("ascii", "replace")
    if f"{zlib.crc32(head):08x}" != want:
        raise ValueError("checksum mismatch")
    try:
        obj = json.loads(head + b"}")
    except ValueError as exc:
        raise ValueError(f"unparseable JSON ({exc})") from None
    seq, entries = obj.get("seq"), obj.get("entries")
    if seq != expected_seq:
        raise ValueError(f"sequence number {seq}, expected {expected_seq}")
    if not isinstance(entries, list) or not entries:
        raise ValueError("commit holds no entries")
    return Commit(seq, entries)


def scan(data: bytes, path: Path) -> tuple[list[Commit], int, TailRepair | None]:
    """Validate a whole log image. Returns commits, the length of the good prefix, and the repair.

    Pure over bytes so the same rules serve the agent, `show`, and the harness's readers.
    """
    commits: list[Commit] = []
    offset = 0
    lines = data.split(b"\n")
    # split() leaves a final element: b"" when the file ends with a newline, else a torn fragment.
    complete, fragment = lines[:-1], lines[-1]
    for index, raw in enumerate(complete):
        line_no = index + 1
        try:
            commits.append(decode_line(raw, len(commits) + 1))
        except ValueError as exc:
            is_last = index == len(complete) - 1 and not fragment
            if not (is_last and _lost_blocks(raw)):
                raise LogCorrupt(path, line_no, str(exc)) from None
            why = f"{exc}: last line holds NUL bytes (blocks of an unsynced write never stored)"
            return commits, offset, TailRepair(line_no, len(data) - offset, why)
        offset += len(raw) + 1
    if fragment:
        why = "incomplete last line (torn write)"
        return commits, offset, TailRepair(len(complete) + 1, len(fragment), why)
    return commits, offset, None


def _lost_blocks(raw: bytes) -> bool:
    """Whether a complete but invalid line is an unacknowledged write that storage lost part of.

    The agent writes a commit with one append; a kill leaves a prefix of it, which has no
    newline, so a *complete* bad line is no torn write of ours: it is damage to an acknowledged
    commit and is refused like damage anywhere else (dropping it would lose that commit, and a
    finished run would be resumed). One exception is told apart by its bytes: after a power loss
    a file may keep its new length while a block of the append never reached the disk, and the
    file system shows that block as zeros. `encode_commit` never writes a NUL byte (JSON escapes
    control characters), so a NUL inside the line can only be such a hole.
    """
    return b"\x00" in raw


def read_commits(path: Path) -> tuple[list[Commit], TailRepair | None]:
    """Read without repairing or locking (for `show` and for harness-side readers)."""
    data = path.read_bytes() if path.exists() else b""
    commits, _, repair = scan(data, path)
    return commits, repair


class SessionLog:
    """Append-only commit log. The caller holds the session lock."""

    def __init__(self, path: Path, *, fsync: bool = True) -> None:
        self.path = path
        self.fsync = fsync
        self.commits: list[Commit] = []
        self.repair: TailRepair | None = None
        self._fd: int | None = None
        self.failed: StorageFailed | None = None  # set for good by a failed write or sync

    def open(self) -> None:
        created = not self.path.exists()
        data = b"" if created else self.path.read_bytes()
        self.commits, good_len, self.repair = scan(data, self.path)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        self._fd = os.open(self.path, flags, 0o644)
        if self.repair is not None:
            os.ftruncate(self._fd, good_len)
            os.fsync(self._fd)
        if created and self.fsync:
            _fsync_dir(self.path.parent)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def next_seq(self) -> int:
        return len(self.commits) + 1

    def entries(self) -> Iterator[Entry]:
        for c in self.commits:
            yield from c.entries

    def commit(self, entries: list[Entry]) -> int:
        """Append one commit atomically; durable (unless fsync is off) when this returns."""
        assert self._fd is not None, "log not open"
        if self.failed is not None:  # never write on top of a commit whose fate is unknown
            raise self.failed
        seq = self.next_seq
        label = commit_label(entries)
        probe(ProbeKind.COMMIT_BEFORE, label, seq=seq)
        data = encode_commit(seq, entries)
        try:
            write_all(self._fd, data)
        except OSError as exc:
            raise self._failing("write", exc) from exc
        probe(ProbeKind.COMMIT_WRITTEN, label, seq=seq)
        if self.fsync:
            try:
                sync_file(self._fd)
            except OSError as exc:
                raise self._failing("fsync", exc) from exc
        self.commits.append(Commit(seq, entries))
        probe(ProbeKind.COMMIT_AFTER, label, seq=seq)
        return seq

    def _failing(self, op: str, exc: OSError) -> StorageFailed:
        self.failed = StorageFailed(self.path, op, exc)
        return self.failed


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` (a function of its own: the `ignores-short-write` mutant replaces it).

    A short write is not an error: the kernel wrote a prefix (a full disk, a file-size limit, a
    signal), and the rest is written after it."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def sync_file(fd: int) -> None:
    """fsync a commit's file (a function of its own: the `ignores-failed-sync` mutant wraps it)."""
    os.fsync(fd)


def make_dir(path: Path, *, fsync: bool) -> None:
    """Create `path` and its missing parents; with fsync, sync the folder each was made in: a new
    session folder's name is not durable until its parent is synced, and a power loss would take
    it away with every commit synced into it."""
    missing = []
    level = path
    while not level.exists():
        missing.append(level)
        level = level.parent
    path.mkdir(parents=True, exist_ok=True)
    if fsync:
        for made in reversed(missing):
            _fsync_dir(made.parent)


def replace_file(path: Path, data: bytes, *, fsync: bool) -> None:
    """Make `path` hold `data`, whole or not at all: written to a temporary name, then renamed
    over it. With fsync, durably: the file is synced before the rename (else a power loss may
    keep the new name with none of its bytes) and its folder after it (else the rename itself
    may be lost, and a file that did not exist before with it)."""
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
