"""A recording keeps snapshots within its caps (count, bytes held, read) and the matrix's; past them, none."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.fakes.case import CaseState
from crashmatrix.harness.execution import snapshot_capture
from crashmatrix.harness.execution.snapshot_capture import BoundedCapture, Budget
from crashmatrix.harness.execution.snapshot_limits import Limits, Refusal

PROVIDER = CaseState((), (), {})


def case_tree(root: Path) -> Path:
    case_dir = root / "loop-0123456789ab"
    (case_dir / "session").mkdir(parents=True)
    (case_dir / "ws").mkdir()
    return case_dir


def run_on(capture: BoundedCapture, case_dir: Path, events: int, grow: int = 100) -> None:
    """An incarnation that retries on and on: each event appends to its log."""
    log = case_dir / "session" / "session.jsonl"
    for n in range(1, events + 1):
        with open(log, "ab") as f:
            f.write(b"r" * grow)
        capture.take(case_dir, PROVIDER, 1, n)


def test_a_recording_keeps_at_most_its_cap_of_snapshots_and_says_why_for_the_rest(tmp_path: Path) -> None:
    """P5: an agent retrying far past its limit made thousands of events, a snapshot at each, and
    the harness grew to 5 GB."""
    capture = BoundedCapture(1, limits=Limits(states=3))
    run_on(capture, case_tree(tmp_path), 10)
    assert sorted(capture.snaps) == [1, 2, 3]
    assert sorted(capture.refused) == list(range(4, 11))
    assert {why for why, _ in capture.refused.values()} == {Refusal.STATES}


def test_a_growing_log_stops_at_the_cap_on_what_the_snapshots_hold(tmp_path: Path) -> None:
    cap = 50_000
    capture = BoundedCapture(1, limits=Limits(held_bytes=cap))
    run_on(capture, case_tree(tmp_path), 100, grow=1000)
    assert capture.held <= cap
    assert 1 <= len(capture.snaps) < 100
    assert sum(s.tree.fresh for s in capture.snaps.values()) <= cap
    first_refused = min(capture.refused)
    assert capture.refused[first_refused][0] is Refusal.HELD
    assert all(n < first_refused for n in capture.snaps), "once stopped, it stays stopped"


def test_past_a_cap_nothing_more_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    capture = BoundedCapture(1, limits=Limits(read_bytes=2000))
    case_dir = case_tree(tmp_path)
    run_on(capture, case_dir, 5, grow=1000)
    assert capture.refused
    assert {why for why, _ in capture.refused.values()} == {Refusal.READ}

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("read after the cap")

    monkeypatch.setattr(snapshot_capture, "take", refuse)
    run_on(capture, case_dir, 5)


def test_the_recordings_of_a_matrix_share_one_budget(tmp_path: Path) -> None:
    budget = Budget(60_000)
    limits = Limits()
    first, second = (BoundedCapture(1, limits=limits, budget=budget) for _ in range(2))
    run_on(first, case_tree(tmp_path / "a"), 5, grow=10_000)  # 150 kB of log in all: over the cap
    assert first.refused
    assert next(iter(first.refused.values()))[0] is Refusal.MATRIX
    assert budget.held == first.held <= budget.cap
    left = budget.cap - budget.held
    run_on(second, case_tree(tmp_path / "b"), 1, grow=left)
    assert not second.snaps, "what is left of the budget is not enough"
    budget.release(first.held)
    assert budget.held == 0
    third = BoundedCapture(1, limits=limits, budget=budget)
    run_on(third, case_tree(tmp_path / "c"), 1, grow=left)
    assert len(third.snaps) == 1
