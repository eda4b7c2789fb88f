"""Faulty session-log rules: how a restarted agent repairs what a crash left in its log."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path

from crashmatrix.agent import log as log_module
from crashmatrix.agent.lock import SessionLock
from crashmatrix.agent.log import Commit, SessionLog, TailRepair
from crashmatrix.agent.loop import Agent
from crashmatrix.agent.probe import ProbeKind, probe
from crashmatrix.agent.records import Entry, EntryType, Role, commit_label
from crashmatrix.harness.mutants.patching import Patcher


def never_syncs(p: Patcher) -> None:
    build: Callable[..., None] = SessionLog.__init__

    def init(self: SessionLog, path: Path, *, fsync: bool = True) -> None:
        # The fault: the log never syncs a commit (nor its folder), whatever --fsync says; a
        # SIGKILL keeps the page cache, so only a power loss can tell.
        build(self, path, fsync=False)

    p.replace(SessionLog, "__init__", init)


def ignores_failed_sync(p: Patcher) -> None:
    sync: Callable[[int], None] = log_module.sync_file

    def sync_or_shrug(fd: int) -> None:
        # The fault: a failed fsync is taken as a slow disk's hiccup; the commit is
        # acknowledged and the agent runs on, though its bytes may never reach the disk.
        with contextlib.suppress(OSError):
            sync(fd)

    p.replace(log_module, "sync_file", sync_or_shrug)


def ignores_short_write(p: Patcher) -> None:
    def write_once(fd: int, data: bytes) -> None:
        # The fault: a write that wrote something is taken for the whole commit (only one that
        # wrote nothing is tried again), so a short write leaves a commit cut short on disk,
        # acknowledged, with the next commit appended to its half line.
        while os.write(fd, data) == 0:
            pass

    p.replace(log_module, "write_all", write_once)


def repair_drops_one_more(p: Patcher) -> None:
    open_log: Callable[[SessionLog], None] = SessionLog.open

    def open_and_repair(self: SessionLog) -> None:
        open_log(self)
        if self.repair is None or not self.commits or self._fd is None:
            return
        if any(e["type"] != EntryType.TOOL_STARTED for e in self.commits[-1].entries):
            return
        # The fault: the repair takes an intent whose result was the torn write for part of
        # that write, and cuts back to the start of the last good line instead of its end: the
        # acknowledged tool_started goes with the torn result.
        data = self.path.read_bytes()
        keep = data.rstrip(b"\n").rfind(b"\n") + 1
        os.ftruncate(self._fd, keep)
        os.fsync(self._fd)
        self.commits.pop()

    p.replace(SessionLog, "open", open_and_repair)


def _compacting(p: Patcher, compact: Callable[[Path, bytes], None],
                when: Callable[[list[Commit], bool], bool] = lambda commits, whole: True) -> None:
    """Patch the log's open so that a restart first compacts the log it found: `compact` is
    given the log's absolute path and its good commits' bytes (read once), `when` its commits
    and whether the log is whole (no torn tail) holds."""
    open_log: Callable[[SessionLog], None] = SessionLog.open

    def open_and_compact(self: SessionLog) -> None:
        path = Path(os.path.abspath(self.path))
        data = path.read_bytes() if path.exists() else b""
        if data:
            commits, good_len, _ = log_module.scan(data, path)
            if commits and when(commits, good_len == len(data)):
                compact(path, data[:good_len])
        open_log(self)

    p.replace(SessionLog, "open", open_and_compact)


def _rewrite_in_place(path: Path, good: bytes) -> None:
    """Truncate the log, then write `good` back and sync: no probe event lies between the two
    calls, so only a crash at the system call in between sees the log empty (the safe way: a
    temporary file renamed over it)."""
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        log_module.write_all(fd, good)
        os.fsync(fd)
    finally:
        os.close(fd)


def compacts_log_in_place(p: Patcher) -> None:
    # The fault: every restart compacts its log in place (`_rewrite_in_place`), with every
    # commit of the session gone if it dies between the truncate and the rewrite.
    _compacting(p, _rewrite_in_place)


def tidies_finished_log(p: Patcher) -> None:
    acquire: Callable[[SessionLock], None] = SessionLock.acquire
    clean: list[bool] = [False]  # whether the last holder released the lock (an empty lock file)

    def acquire_and_look(self: SessionLock) -> None:
        clean[0] = self.path.exists() and self.path.stat().st_size == 0
        acquire(self)

    def finished_cleanly(commits: list[Commit], whole: bool) -> bool:
        return clean[0] and whole and any(e["type"] == EntryType.RUN_FINISHED for e in commits[-1].entries)

    # The fault: a session whose run finished and whose last process shut down cleanly (it
    # released the lock) is tidied when opened again, its log rewritten in place. Only the start
    # after a clean finish does it: at depth 1, only a crash at a system call of the settle (the
    # recover on the finished work) sees the log empty.
    p.replace(SessionLock, "acquire", acquire_and_look)
    _compacting(p, _rewrite_in_place, finished_cleanly)


def compacts_log_unsynced_rename(p: Patcher) -> None:
    def rename_over(path: Path, good: bytes) -> None:
        # The fault: the good commits go to a temporary file renamed over the log, the safe way,
        # but the folder is synced before the file: between the two syncs the new name is
        # durable and its bytes are not. A kill there keeps the page cache and loses nothing;
        # only a power loss at that system call finds the log empty.
        tmp = path.with_suffix(".compact")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            log_module.write_all(fd, good)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        log_module._fsync_dir(path.parent)
        fd = os.open(path, os.O_WRONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    _compacting(p, rename_over)


def settings_resaved_unsynced(p: Patcher) -> None:
    recover: Callable[..., str | None] = Agent.recover

    def resave_then_recover(self: Agent, start_queued: bool = True) -> str | None:
        # The fault: every start (a run's too) saves the settings it read again, by renaming a temporary
        # file over them, synced neither (the file nor its folder). The strict loss undoes the
        # rename (the synced settings are back) and a kill keeps the page cache; a file system
        # that persists the rename before the bytes leaves a settings file with nothing in it.
        path = self.log.path.parent / "config.json"
        if path.exists():
            log_module.replace_file(path, path.read_bytes(), fsync=False)
        return recover(self, start_queued)

    p.replace(Agent, "recover", resave_then_recover)


def holes_taken_for_damage(p: Patcher) -> None:
    def no_lost_blocks(raw: bytes) -> bool:
        # The fault: a complete last line with NUL bytes in it is taken for damage to an
        # acknowledged commit, never for the unsynced append a power loss kept the length of and
        # not all the blocks: the session refuses to open after such a power loss.
        return False

    p.replace(log_module, "_lost_blocks", no_lost_blocks)


_RECORD = re.compile(rb'\{"seq":(\d+),')


def _salvage(raw: bytes) -> Commit | None:
    """The commit a line holds, its seq taken as it comes; in a damaged line, the first record
    that decodes from one of its record starts on (the reader skips the damage before it)."""
    for found in _RECORD.finditer(raw):
        try:
            return log_module.decode_line(raw[found.start():], int(found.group(1)))
        except ValueError:
            continue
    return None


def _scan_skipping(data: bytes, path: Path) -> tuple[list[Commit], int, TailRepair | None]:
    """`scan`, except that a commit's seq is taken as it comes (not required to follow the one
    before) and a complete line that does not decode is skipped, not refused, up to the first
    record in it that does. A torn last line (an incomplete one, or a complete one with NUL
    bytes and no record) is repaired as `scan` repairs it."""
    commits: list[Commit] = []
    offset = 0
    lines = data.split(b"\n")
    complete, fragment = lines[:-1], lines[-1]
    for index, raw in enumerate(complete):
        commit = _salvage(raw)
        if commit is not None:
            commits.append(commit)
        elif index == len(complete) - 1 and not fragment and log_module._lost_blocks(raw):
            why = "last line holds NUL bytes (blocks of an unsynced write never stored)"
            return commits, offset, TailRepair(index + 1, len(data) - offset, why)
        offset += len(raw) + 1
    if fragment:
        why = "incomplete last line (torn write)"
        return commits, offset, TailRepair(len(complete) + 1, len(fragment), why)
    return commits, offset, None


def group_commits_skips_damage(p: Patcher) -> None:
    close_log: Callable[[SessionLog], None] = SessionLog.close
    waiting: dict[SessionLog, list[tuple[str, int]]] = {}  # written, not yet synced nor acknowledged

    def may_wait(entries: list[Entry]) -> bool:
        # A plain assistant message (no run_finished with it) is shown to no one and starts
        # nothing: the commit after it (the intent of its first call, in the loop) syncs it.
        return all(e["type"] == EntryType.MESSAGE and e["role"] == Role.ASSISTANT for e in entries)

    def sync_group(self: SessionLog) -> None:
        group = waiting.pop(self, [])
        if self.fsync and self._fd is not None:
            try:
                log_module.sync_file(self._fd)
            except OSError as exc:
                raise self._failing("fsync", exc) from exc
        for label, seq in group:
            probe(ProbeKind.COMMIT_AFTER, label, seq=seq)

    def group_commit(self: SessionLog, entries: list[Entry]) -> int:
        assert self._fd is not None, "log not open"
        if self.failed is not None:
            raise self.failed
        seq = self.next_seq
        label = commit_label(entries)
        probe(ProbeKind.COMMIT_BEFORE, label, seq=seq)
        try:
            log_module.write_all(self._fd, log_module.encode_commit(seq, entries))
        except OSError as exc:
            raise self._failing("write", exc) from exc
        probe(ProbeKind.COMMIT_WRITTEN, label, seq=seq)
        self.commits.append(Commit(seq, entries))
        waiting.setdefault(self, []).append((label, seq))
        if not may_wait(entries):
            sync_group(self)
        return seq

    def close(self: SessionLog) -> None:
        try:
            if waiting.get(self) and self.failed is None:
                sync_group(self)
        finally:
            waiting.pop(self, None)
            close_log(self)

    def next_seq(self: SessionLog) -> int:
        return self.commits[-1].seq + 1 if self.commits else 1

    # The fault, two rules each safe alone when a power loss keeps a prefix of the unsynced
    # writes: (1) group commit: each commit is its own append, but a plain assistant message is
    # synced (and acknowledged) only with the commit after it, so [assistant k, tool_started k]
    # is two writes and one fsync before the effect (a tool result is synced at once: the next
    # request shows it to the model); (2) the reader skips a damaged line up to the first record
    # in it that decodes, and takes seqs as they come. A file system that persists the later
    # write of a group and not the earlier one leaves zeros, then the intent, on one line: the
    # reader keeps an intent whose call the log no longer holds and the agent runs on, appending
    # to a log that the strict reader refuses.
    p.replace(log_module, "scan", _scan_skipping)
    p.replace(SessionLog, "commit", group_commit)
    p.replace(SessionLog, "close", close)
    p.replace(SessionLog, "next_seq", property(next_seq))
