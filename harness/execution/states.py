"""Crash states: snapshots of a case tree taken at probe events, restored elsewhere, keyed by content.

A SIGKILL keeps the page cache, so what a kill at event k leaves is the case tree (session and
workspace) as it stands while the agent waits at event k, plus the fake provider's state (its
request log, its fault schedule, its stored responses). `take` reads both into memory (a tree
byte-identical to the previous event's is shared, not copied); `restore` writes them into another
case directory, and a case then starts from that state with `recover`, as after a real kill,
without running the incarnation up to the crash again (issue 17).

Paths inside the tree name the directory they were written in (our agent's config holds its
workspace's absolute path, the provider URL holds the case key). Case directories are all named
`<scenario>-<12 hex digits>` under one root, so every name has the same length, and `restore`
rewrites the old name into the new one byte for byte: offsets within files (a torn tail, a log
position) stay valid. `key` hashes a restored state with its directory name masked: two crash
points that leave the same bytes, and the same provider state, have the same key, and one
recovery serves both (`--states`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.fakes.case import CaseState
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.harness.records.observation import IncarnationRecord

TREE = ("session", "ws")  # what a case directory holds that the agent reads and writes
MASK = "\0case-dir\0"  # stands for the directory's name in a key

# One entry of a tree: its path relative to the case directory, its st_mode (type and permission
# bits), and its content: a file's bytes, a link's target, None for a directory.
Entry = tuple[str, int, bytes | None]


class Tree:
    """A case tree read into memory (`read_tree`): what a snapshot keeps. Immutable; its digest
    with a directory name masked is computed once."""

    __slots__ = ("_digests", "entries")

    def __init__(self, entries: tuple[Entry, ...]) -> None:
        self.entries = entries
        self._digests: dict[str, bytes] = {}

    def digest(self, dir_name: str) -> bytes:
        """Every entry (path, mode, content, each length-prefixed so no two trees hash alike by
        concatenation), with `dir_name` masked wherever it appears in a content."""
        found = self._digests.get(dir_name)
        if found is None:
            masked, mask = dir_name.encode(), MASK.encode()
            h = hashlib.sha256()
            for rel, mode, data in self.entries:
                head = f"{rel}\0{mode:o}".encode()
                h.update(len(head).to_bytes(4, "big") + head)
                if data is not None:
                    content = data.replace(masked, mask)
                    h.update(len(content).to_bytes(8, "big") + content)
            found = self._digests[dir_name] = h.digest()
        return found


@dataclass(frozen=True)
class Snapshot:
    """The case tree and provider state at one event of one incarnation, kept in memory."""

    tree: Tree
    dir_name: str  # the case directory it was taken in (its name is rewritten on restore)
    provider: CaseState
    incarnation: int
    event: int


def read_tree(root: Path) -> Tree:
    """The tree of case directory `root`, each directory before what it holds (entries in name
    order); links are kept as links, never followed. Plain string paths: this runs at every
    event of a recording, and pathlib's joins were a third of its cost."""
    entries: list[Entry] = []
    base = os.fspath(root)
    for part in TREE:
        top = os.path.join(base, part)
        if os.path.isdir(top):
            entries.append((part, os.lstat(top).st_mode, None))
            _walk(top, part, entries)
    return Tree(tuple(entries))


def take(case_dir: Path, provider: CaseState, incarnation: int, event: int,
         previous: Snapshot | None = None) -> Snapshot:
    """Read the tree of `case_dir` (the agent is waiting at the event: nothing moves). When it
    is byte-identical to `previous`'s, that tree is shared (and so is its digest)."""
    tree = read_tree(case_dir)
    if previous is not None and previous.dir_name == case_dir.name and previous.tree.entries == tree.entries:
        tree = previous.tree
    return Snapshot(tree, case_dir.name, provider, incarnation, event)


def restore(snap: Snapshot, case_dir: Path) -> CaseState:
    """Write the snapshot's tree into `case_dir` (which must not hold one), its directory name
    rewritten to `case_dir`'s byte for byte; returns the provider state, rewritten the same way."""
    old, new = snap.dir_name, case_dir.name
    if len(old) != len(new):
        raise ValueError(f"case directory names differ in length: {old!r}, {new!r}")
    case_dir.mkdir(parents=True, exist_ok=True)
    before, after = old.encode(), new.encode()
    dirs: list[tuple[Path, int]] = []
    for rel, mode, data in snap.tree.entries:
        path = case_dir / rel
        if data is None:
            path.mkdir(parents=True, exist_ok=True)
            dirs.append((path, mode))
        elif stat.S_ISLNK(mode):
            os.symlink(data.replace(before, after), path)
        else:
            with open(path, "wb") as f:
                f.write(data.replace(before, after))
            os.chmod(path, stat.S_IMODE(mode))
    for path, mode in reversed(dirs):  # last: a read-only directory is written into first
        os.chmod(path, stat.S_IMODE(mode))
    return renamed(snap.provider, old, new)


def _walk(path: str, rel: str, entries: list[Entry]) -> None:
    """Append what directory `path` (`rel` in the tree) holds: directories (an empty one is state
    too), regular files and symbolic links, in name order, each directory before its contents.
    With a stack, not recursion: an agent's tree may be any depth deep (trees.py)."""
    pending: list[Iterator[os.DirEntry[str]]] = []
    rels: list[str] = []

    def listed(where: str) -> Iterator[os.DirEntry[str]]:
        with os.scandir(where) as listing:
            return iter(sorted(listing, key=lambda e: e.name))

    pending.append(listed(path))
    rels.append(rel)
    while pending:
        entry = next(pending[-1], None)
        if entry is None:
            pending.pop()
            rels.pop()
            continue
        child = f"{rels[-1]}/{entry.name}"
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISLNK(mode):
            entries.append((child, mode, os.readlink(entry.path).encode(errors="surrogateescape")))
        elif stat.S_ISREG(mode):
            with open(entry.path, "rb") as f:
                entries.append((child, mode, f.read()))
        elif stat.S_ISDIR(mode):
            entries.append((child, mode, None))
            pending.append(listed(entry.path))
            rels.append(child)


def unlogged(provider: CaseState) -> CaseState:
    """The provider state without its request log: what the fake's next answers depend on. It
    answers a request from the request itself, the faults left and the stored responses, never
    from the log (which only numbers the requests), and the agent never sees the log. Two crash
    points that differ only in how many requests came before (`provider.before` and the next
    `provider.after`: the reply was read but nothing written) leave one state for recovery."""
    return dataclasses.replace(provider, records=())


def renamed(state: CaseState, old: str, new: str) -> CaseState:
    """`state` with directory name `old` rewritten to `new` wherever it appears."""
    if old == new:
        return state
    text = json.dumps(state.to_json(), ensure_ascii=False).replace(old, new)
    data: dict[str, Any] = json.loads(text)
    records = tuple(RequestRecord(**r) for r in data["records"])
    return dataclasses.replace(state, records=records, responses=data["responses"],
                               issued=int(data.get("issued", 0)))


def key(case_dir: Path, provider: CaseState, *context: object) -> str:
    """What recovery can observe in `case_dir`, hashed (`tree_key`)."""
    return tree_key(read_tree(case_dir), case_dir.name, provider, *context)


def tree_key(tree: Tree, dir_name: str, provider: CaseState, *context: object) -> str:
    """What recovery can observe, hashed: the tree (`Tree.digest`) and the provider state, with the
    case directory's name masked, and `context` (the scenario, the command the next incarnation
    runs, its index)."""
    h = hashlib.sha256(tree.digest(dir_name))
    state = json.dumps(provider.to_json(), ensure_ascii=False, sort_keys=True)
    h.update(state.replace(dir_name, MASK).encode())
    h.update(json.dumps([str(c) for c in context]).replace(dir_name, MASK).encode())
    return h.hexdigest()


def settle_key(case_dir: Path, provider: CaseState, *context: object) -> str:
    """The key a settle run is kept by: `key` without the provider's request log. The fake's
    answer to a request is a function of the request, the faults left and the stored responses,
    never of the log; and a settle is kept only when it sent no request (`Settled`). So two final
    states that differ only in how many requests led to them settle alike."""
    return key(case_dir, unlogged(provider), *context)


class Settled:
    """Settle runs that changed nothing (no byte, no request), by the key of the final state they
    ran on (`settle_key`): a case that reaches the same final state settles the same way."""

    def __init__(self) -> None:
        self._done: dict[str, IncarnationRecord] = {}
        self._lock = threading.Lock()
        self.reused = 0  # settle runs not made: a kept one stood in

    def keep(self, state_key: str, record: IncarnationRecord) -> None:
        if record.timed_out or record.nondeterministic or record.runaway is not None:
            return  # only a settle that ended, as an agent ends
        with self._lock:
            self._done.setdefault(state_key, record)

    def reuse(self, state_key: str, record: IncarnationRecord) -> bool:
        """Fill `record` from a settle kept for `state_key`; False when there is none."""
        with self._lock:
            done = self._done.get(state_key)
        if done is None:
            return False
        with self._lock:
            self.reused += 1
        record.events = list(done.events)
        record.exit_code = done.exit_code
        record.output = done.output  # the same run, so the same words
        record.duration_ms = 0.0
        return True
