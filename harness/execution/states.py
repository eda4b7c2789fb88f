"""Crash states: snapshots of a case tree taken at probe events, restored elsewhere, keyed by content.

A SIGKILL keeps the page cache, so what a kill at event k leaves is the case tree (session and
workspace) as it stands while the agent waits at event k, plus the fake provider's state (its
request log, its fault schedule, its stored responses). `take` reads both into memory (a tree
byte-identical to the previous event's is shared, not copied, and so is each unchanged file); every
kind of entry an agent can make without privilege is kept (files by their data extents, FIFOs and
sockets as nodes: snapshot_files.py), and a tree over the bounds of snapshot_limits.py is refused,
its crash points left to real kills. `restore` writes them into another case directory, and a case
then starts from that state with `recover`, as after a real kill, without running the incarnation
up to the crash again (issue 17).

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
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.fakes.case import CaseState
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.harness.execution.snapshot_files import Data, make_node, read_data, write_data
from crashmatrix.harness.execution.snapshot_limits import LIMITS, Limits, Refusal, Refused
from crashmatrix.harness.records.observation import IncarnationRecord

TREE = ("session", "ws")  # what a case directory holds that the agent reads and writes
MASK = "\0case-dir\0"  # stands for the directory's name in a key

# One entry of a tree: its path relative to the case directory, its st_mode (its kind and
# permission bits), and its content: a regular file's data, a link's target, None for a directory,
# a FIFO or a socket (a device is refused: snapshot_limits.Refusal.DEVICE).
Entry = tuple[str, int, Data | bytes | None]


class Tree:
    """A case tree read into memory (`read_tree`): what a snapshot keeps. Immutable; its digest
    with a directory name masked is computed once. `held`: the bytes it holds (file data, link
    targets); `fresh`: those not shared with the tree it was read after (what keeping it costs)."""

    __slots__ = ("_digests", "entries", "fresh", "held")

    def __init__(self, entries: tuple[Entry, ...], fresh: int | None = None) -> None:
        self.entries = entries
        self.held = sum(_held(content) for _, _, content in entries)
        self.fresh = self.held if fresh is None else fresh
        self._digests: dict[str, bytes] = {}

    def digest(self, dir_name: str) -> bytes:
        """Every entry (path, mode, content, each length-prefixed so no two trees hash alike by
        concatenation), with `dir_name` masked wherever it appears in a content."""
        found = self._digests.get(dir_name)
        if found is None:
            masked, mask = dir_name.encode(), MASK.encode()
            h = hashlib.sha256()
            for rel, mode, content in self.entries:
                head = f"{rel}\0{mode:o}".encode()
                h.update(len(head).to_bytes(4, "big") + head)
                if isinstance(content, Data):
                    h.update(content.digest(masked, mask))
                elif content is not None:
                    target = content.replace(masked, mask)
                    h.update(len(target).to_bytes(8, "big") + target)
            found = self._digests[dir_name] = h.digest()
        return found

    def files(self) -> dict[str, Data]:
        """Path -> data of every regular file."""
        return {rel: content for rel, _, content in self.entries if isinstance(content, Data)}


@dataclass(frozen=True)
class Snapshot:
    """The case tree and provider state at one event of one incarnation, kept in memory."""

    tree: Tree
    dir_name: str  # the case directory it was taken in (its name is rewritten on restore)
    provider: CaseState
    incarnation: int
    event: int


def read_tree(root: Path, limits: Limits = LIMITS, previous: Tree | None = None) -> Tree:
    """The tree of case directory `root`, each directory before what it holds (entries in name
    order); links are kept as links, never followed; files by their data (snapshot_files.py).
    Refused when it is over `limits` or cannot be read whole. A file as it was in `previous` is
    that tree's object. Plain string paths: this runs at every event of a recording, and
    pathlib's joins were a third of its cost."""
    reader = _Reader(limits, previous.files() if previous is not None else {})
    base = os.fspath(root)
    for part in TREE:
        top = os.path.join(base, part)
        if os.path.isdir(top):
            reader.entries.append((part, os.lstat(top).st_mode, None))
            reader.walk(top, part)
    return Tree(tuple(reader.entries), reader.fresh)


def take(case_dir: Path, provider: CaseState, incarnation: int, event: int,
         previous: Snapshot | None = None, limits: Limits = LIMITS) -> Snapshot:
    """Read the tree of `case_dir` (the agent is waiting at the event: nothing moves). When it
    is byte-identical to `previous`'s, that tree is shared (and so is its digest), and so is
    each file that is. Refused when the tree is over `limits`."""
    same = previous if previous is not None and previous.dir_name == case_dir.name else None
    tree = read_tree(case_dir, limits, same.tree if same is not None else None)
    if same is not None and same.tree.entries == tree.entries:
        tree = same.tree
    return Snapshot(tree, case_dir.name, provider, incarnation, event)


def restore(snap: Snapshot, case_dir: Path) -> CaseState:
    """Write the snapshot's tree into `case_dir` (which must not hold one), its directory name
    rewritten to `case_dir`'s byte for byte; returns the provider state, rewritten the same way."""
    old, new = snap.dir_name, case_dir.name
    if len(old) != len(new):
        raise ValueError(f"case directory names differ in length: {old!r}, {new!r}")
    case_dir.mkdir(parents=True, exist_ok=True)
    before, after = old.encode(), new.encode()
    base = os.fspath(case_dir)
    dirs: list[tuple[str, int]] = []
    for rel, mode, content in snap.tree.entries:
        path = os.path.join(base, rel)
        if stat.S_ISDIR(mode):
            os.makedirs(path, exist_ok=True)
            dirs.append((path, mode))
            continue
        if isinstance(content, Data):
            write_data(path, content, before, after)
        elif stat.S_ISLNK(mode) and content is not None:
            os.symlink(content.replace(before, after), path)
            continue  # a link's own permission bits mean nothing on Linux
        else:
            make_node(path, mode)
        os.chmod(path, stat.S_IMODE(mode))
    for path, mode in reversed(dirs):  # last: a read-only directory is written into first
        os.chmod(path, stat.S_IMODE(mode))
    return renamed(snap.provider, old, new)


class _Reader:
    """One reading of a tree: its entries so far, what its files' data add up to, and what of
    it is new since the previous tree."""

    def __init__(self, limits: Limits, before: dict[str, Data]) -> None:
        self.limits = limits
        self.before = before
        self.entries: list[Entry] = []
        self.used = 0  # bytes held so far
        self.fresh = 0  # of them, in objects the previous tree did not have

    def walk(self, path: str, rel: str) -> None:
        """Append what directory `path` (`rel` in the tree) holds, in name order, each directory
        before its contents (an empty one is state too). With a stack, not recursion: an agent's
        tree may be any depth deep (trees.py)."""
        pending: list[Iterator[os.DirEntry[str]]] = [self._listed(path, rel)]
        rels: list[str] = [rel]
        while pending:
            entry = next(pending[-1], None)
            if entry is None:
                pending.pop()
                rels.pop()
                continue
            child = f"{rels[-1]}/{entry.name}"
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as exc:
                raise Refused(Refusal.UNREADABLE, f"{child}: {exc.strerror}") from exc
            if stat.S_ISDIR(mode):
                self.entries.append((child, mode, None))
                pending.append(self._listed(entry.path, child))
                rels.append(child)
            else:
                self.entries.append((child, mode, self._content(entry.path, child, mode)))

    def _content(self, path: str, rel: str, mode: int) -> Data | bytes | None:
        if stat.S_ISLNK(mode):
            try:
                target = os.readlink(path).encode(errors="surrogateescape")
            except OSError as exc:
                raise Refused(Refusal.UNREADABLE, f"{rel}: {exc.strerror}") from exc
            self.used += len(target)
            self.fresh += len(target)
            return target
        if stat.S_ISREG(mode):
            same = self.before.get(rel)
            data = read_data(path, rel, self.limits, self.used, same)
            self.used += data.held
            self.fresh += 0 if data is same else data.held
            return data
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            return None
        raise Refused(Refusal.DEVICE, f"{rel} is a device node, which a restore cannot make without "
                                      "privilege")

    @staticmethod
    def _listed(where: str, rel: str) -> Iterator[os.DirEntry[str]]:
        try:
            with os.scandir(where) as listing:
                return iter(sorted(listing, key=lambda e: e.name))
        except OSError as exc:
            raise Refused(Refusal.UNREADABLE, f"{rel}: {exc.strerror}") from exc


def _held(content: Data | bytes | None) -> int:
    if isinstance(content, Data):
        return content.held
    return 0 if content is None else len(content)


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
    """What recovery can observe in `case_dir`, hashed (`tree_key`). A tree over the bounds of a
    state is not read: its key is one no other state has, so nothing is shared with it."""
    try:
        tree = read_tree(case_dir)
    except Refused as exc:
        return f"unkept:{exc.reason.value}:{uuid.uuid4().hex}"
    return tree_key(tree, case_dir.name, provider, *context)


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
        if (record.timed_out or record.nondeterministic or record.runaway is not None
                or record.protocol_error is not None):
            return  # only a settle that ended, as an agent ends (its protocol kept, too)
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
