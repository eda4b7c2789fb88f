"""Crash states: snapshots restored under another name, content keys, reused settles, the audit's sampling."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest

from crashmatrix.fakes.case import CaseState
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.harness.execution.audit import audited, compared
from crashmatrix.harness.execution.states import (
    Settled,
    key,
    restore,
    settle_key,
    take,
    tree_key,
    unlogged,
)
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.observation import IncarnationRecord
from crashmatrix.harness.records.results import CaseResult, Verdict

A = "changelog-0123456789ab"
B = "changelog-ba9876543210"


def tree(root: Path, name: str, log: str = "line\n") -> Path:
    case_dir = root / name
    (case_dir / "session").mkdir(parents=True)
    (case_dir / "ws").mkdir()
    (case_dir / "session" / "session.jsonl").write_text(log, encoding="utf-8")
    (case_dir / "session" / "config.json").write_text(f'{{"workspace": "/x/{name}/ws"}}', encoding="utf-8")
    (case_dir / "ws" / "CHANGELOG.md").write_text("# Changelog\n", encoding="utf-8")
    return case_dir


def state(name: str) -> CaseState:
    record = RequestRecord(0, [{"role": "user", "content": f"in /x/{name}/ws"}], ["read"], 200)
    return CaseState((record,), (1,), {})


def test_a_snapshot_is_restored_under_another_name_byte_for_byte(tmp_path: Path) -> None:
    snap = take(tree(tmp_path, A), state(A), 1, 4)
    provider = restore(snap, tmp_path / B)
    config = (tmp_path / B / "session" / "config.json").read_text(encoding="utf-8")
    assert config == f'{{"workspace": "/x/{B}/ws"}}'
    assert (tmp_path / B / "ws" / "CHANGELOG.md").read_text(encoding="utf-8") == "# Changelog\n"
    assert provider.records[0].messages[0]["content"] == f"in /x/{B}/ws"
    assert provider.faults_left == (1,)
    with pytest.raises(ValueError, match="differ in length"):
        restore(snap, tmp_path / "changelog-short")


def test_the_key_masks_the_directory_name_and_sees_every_byte_and_the_provider(tmp_path: Path) -> None:
    one, two = tree(tmp_path, A), tree(tmp_path, B)
    assert key(one, state(A), "s", 1) == key(two, state(B), "s", 1)
    assert key(one, state(A), "s", 1) != key(one, state(A), "s", 2)
    other = CaseState(state(A).records, (0,), {})
    assert key(one, state(A), "s", 1) != key(one, other, "s", 1)
    (two / "session" / "session.jsonl").write_text("linf\n", encoding="utf-8")
    assert key(one, state(A), "s", 1) != key(two, state(B), "s", 1)


def test_a_recovery_key_leaves_out_only_the_request_log(tmp_path: Path) -> None:
    """The log numbers requests and nobody reads it: two states that differ in it alone are one
    state to recover from (and to settle from); the faults left and stored responses, which decide
    the fake's next answers, still part them."""
    one = tree(tmp_path, A)
    more = dataclasses.replace(state(A), records=(*state(A).records, dataclasses.replace(
        state(A).records[0], index=1)))
    assert key(one, state(A)) != key(one, more)
    assert key(one, unlogged(state(A))) == key(one, unlogged(more))
    assert settle_key(one, state(A), "s") == settle_key(one, more, "s")
    for other in (CaseState(more.records, (0,), {}), CaseState(more.records, (1,), {"r1": [1]})):
        assert key(one, unlogged(state(A))) != key(one, unlogged(other))
        assert settle_key(one, state(A), "s") != settle_key(one, other, "s")


@pytest.mark.parametrize("change", ["empty directory", "symbolic link", "permission bits", "file moved"])
def test_the_key_sees_what_a_recovery_could_read_besides_file_bytes(tmp_path: Path, change: str) -> None:
    one, two = tree(tmp_path, A), tree(tmp_path, B)
    assert key(one, state(A)) == key(two, state(B))
    if change == "empty directory":
        (two / "session" / "inbox").mkdir()
    elif change == "symbolic link":
        (two / "ws" / "latest").symlink_to("CHANGELOG.md")
    elif change == "permission bits":
        (two / "ws" / "CHANGELOG.md").chmod(0o444)
    else:
        (two / "ws" / "CHANGELOG.md").rename(two / "ws" / "CHANGES.md")
    assert key(one, state(A)) != key(two, state(B)), change


def test_a_snapshot_held_in_memory_keys_and_restores_as_the_tree_it_was_taken_from(tmp_path: Path) -> None:
    one = tree(tmp_path, A)
    (one / "session" / "inbox").mkdir()
    (one / "ws" / "latest").symlink_to(f"/x/{A}/ws/CHANGELOG.md")
    (one / "ws" / "CHANGELOG.md").chmod(0o444)
    snap = take(one, state(A), 1, 4)
    assert tree_key(snap.tree, snap.dir_name, snap.provider, "s", 1) == key(one, state(A), "s", 1)
    restore(snap, tmp_path / B)
    two = tmp_path / B
    assert (two / "session" / "inbox").is_dir(), "an empty directory is restored"
    assert os.readlink(two / "ws" / "latest") == f"/x/{B}/ws/CHANGELOG.md", "a link, renamed, not followed"
    assert stat.S_IMODE((two / "ws" / "CHANGELOG.md").stat().st_mode) == 0o444
    assert key(two, state(B), "s", 1) == key(one, state(A), "s", 1)
    again = take(one, state(A), 1, 5, previous=snap)
    assert again.tree is snap.tree, "an unchanged tree is shared with the previous event's"
    (one / "ws" / "CHANGELOG.md").chmod(0o644)
    assert take(one, state(A), 1, 6, previous=again).tree is not snap.tree


def test_a_settle_is_reused_only_when_one_that_ended_was_kept() -> None:
    settled = Settled()
    ran = IncarnationRecord(3, "recover", {}, exit_code=0, duration_ms=12.0)
    hung = IncarnationRecord(3, "recover", {}, timed_out=True)
    settled.keep("k", hung)
    blank = IncarnationRecord(3, "recover", {})
    assert not settled.reuse("k", blank)
    settled.keep("k", ran)
    assert settled.reuse("k", blank)
    assert (blank.exit_code, blank.duration_ms, settled.reused) == (0, 0.0, 1)


def test_the_audited_sample_is_chosen_by_case_id() -> None:
    cases = [Case.parse(f"s/{n:02d}:commit.after:x/kill") for n in range(1, 401)]
    assert not any(audited(c, 0.0) for c in cases)
    assert all(audited(c, 1.0) for c in cases)
    half = [c for c in cases if audited(c, 0.5)]
    assert 120 < len(half) < 280
    assert half == [c for c in cases if audited(c, 0.5)]


def test_a_state_case_that_differs_from_its_real_kill_is_nondeterministic_with_both_sides() -> None:
    base = CaseResult(case="s/04:commit.after:x/kill", scenario="s", depth=1, verdict=Verdict.PASS,
                      commits=5, requests=3, exit_codes=[None, 0, 0], trace=[["a"], ["b"], []])
    assert compared(base, dataclasses.replace(base, duration_ms=99.0)) is base
    other = dataclasses.replace(base, commits=6)
    got = compared(base, other)
    assert got.verdict is Verdict.NONDETERMINISTIC
    assert got.note is not None
    assert "commits: from the state 5, real kill 6" in got.note
