"""Crash states: snapshots of a case tree taken at probe events, restored elsewhere, keyed by content.

A SIGKILL keeps the page cache, so what a kill at event k leaves is the case tree (session and
workspace) as it stands while the agent waits at event k, plus the fake provider's state (its
request log, its fault schedule, its stored responses). `take` copies both there; `restore` puts
them into another case directory, and a case then starts from that state with `recover`, as
after a real kill, without running the incarnation up to the crash again (issue 17).

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
import shutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.fakes.case import CaseState
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.harness.records.observation import IncarnationRecord

TREE = ("session", "ws")  # what a case directory holds that the agent reads and writes
MASK = "\0case-dir\0"  # stands for the directory's name in a key


@dataclass(frozen=True)
class Snapshot:
    """The case tree and provider state at one event of one incarnation, kept in `path`."""

    path: Path  # holds a copy of TREE
    dir_name: str  # the case directory it was taken in (its name is rewritten on restore)
    provider: CaseState
    incarnation: int
    event: int


def take(case_dir: Path, provider: CaseState, dest: Path, incarnation: int, event: int) -> Snapshot:
    """Copy the tree of `case_dir` to `dest` (the agent is waiting at the event: nothing moves)."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in TREE:
        src = case_dir / part
        if src.is_dir():
            shutil.copytree(src, dest / part, symlinks=True)
    return Snapshot(dest, case_dir.name, provider, incarnation, event)


def restore(snap: Snapshot, case_dir: Path) -> CaseState:
    """Put the snapshot's tree into `case_dir` (which must not hold one), its directory name
    rewritten to `case_dir`'s; returns the provider state, rewritten the same way."""
    old, new = snap.dir_name, case_dir.name
    if len(old) != len(new):
        raise ValueError(f"case directory names differ in length: {old!r}, {new!r}")
    case_dir.mkdir(parents=True, exist_ok=True)
    for part in TREE:
        src = snap.path / part
        if src.is_dir():
            shutil.copytree(src, case_dir / part, symlinks=True)
    _rewrite(case_dir, old.encode(), new.encode())
    return _provider_renamed(snap.provider, old, new)


def _entries(root: Path) -> Iterable[tuple[str, os.DirEntry[str]]]:
    """Every entry of the tree, in name order, with its path relative to `root`: directories
    (an empty one is state too), regular files and symbolic links, never followed."""
    stack = [part for part in reversed(TREE) if (root / part).is_dir()]
    while stack:
        rel = stack.pop()
        with os.scandir(root / rel) as listing:
            entries = sorted(listing, key=lambda e: e.name)
        for entry in reversed(entries):
            if entry.is_dir(follow_symlinks=False):
                stack.append(f"{rel}/{entry.name}")
        for entry in entries:
            yield f"{rel}/{entry.name}", entry


def _rewrite(root: Path, old: bytes, new: bytes) -> None:
    for _rel, entry in _entries(root):
        if entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as f:
                data = f.read()
            if old in data:
                with open(entry.path, "wb") as f:
                    f.write(data.replace(old, new))


def _provider_renamed(state: CaseState, old: str, new: str) -> CaseState:
    if old == new:
        return state
    text = json.dumps(state.to_json(), ensure_ascii=False).replace(old, new)
    data: dict[str, Any] = json.loads(text)
    records = tuple(RequestRecord(**r) for r in data["records"])
    return dataclasses.replace(state, records=records, responses=data["responses"])


def key(case_dir: Path, provider: CaseState, *context: object, name: str | None = None) -> str:
    """What recovery can observe, hashed: every file of the tree (relative path and bytes) and
    the provider state, with the case directory's name (`name`, default `case_dir`'s: a snapshot
    is keyed with the name of the directory it was taken in) masked, and `context` (the
    scenario, the command the next incarnation runs, its index)."""
    dir_name = name or case_dir.name
    masked, mask = dir_name.encode(), MASK.encode()
    h = hashlib.sha256()
    for rel, entry in _entries(case_dir):
        # Each entry: its path, its type and permission bits, then its content (a file's bytes, a
        # link's target), each length-prefixed so no two trees hash alike by concatenation.
        mode = entry.stat(follow_symlinks=False).st_mode
        head = f"{rel}\0{mode:o}".encode()
        h.update(len(head).to_bytes(4, "big") + head)
        if entry.is_symlink():
            data = os.readlink(entry.path).encode(errors="surrogateescape")
        elif entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as f:
                data = f.read()
        else:
            continue
        data = data.replace(masked, mask)
        h.update(len(data).to_bytes(8, "big") + data)
    state = json.dumps(provider.to_json(), ensure_ascii=False, sort_keys=True)
    h.update(state.replace(dir_name, MASK).encode())
    h.update(json.dumps([str(c) for c in context]).replace(dir_name, MASK).encode())
    return h.hexdigest()


class Settled:
    """Settle runs that changed nothing, by the key of the final state they ran on: a case that
    reaches a byte-identical final state (and provider state) settles the same way."""

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
        record.duration_ms = 0.0
        return True
