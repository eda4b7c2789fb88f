"""Primed recoveries (`--states`): started while their recording runs, in the job slots it leaves idle,
they change no case's result; what a filter leaves out is not primed; a recording that fails leaves
nothing behind; and a case holds its job only while its agents run."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.cli.matrix_setup import adapter_named, runner_config, scenarios_named
from crashmatrix.harness.execution import runner as runner_module
from crashmatrix.harness.execution.crash_states import CrashStates
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.states_tally import Tally
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult
from tests.support.bash_scenario import bash_then_append

pytestmark = pytest.mark.crash
KEYS = ("verdict", "branches", "commits", "requests", "exit_codes", "trace", "invariants", "violations")
# A tool call that takes a while: the recording is still running well after its first events,
# so a primed recovery has its state before any case does, whatever the machine's load. (That
# an offer is primed at all does not hang on time: it reaches the matrix before the recording's
# end does, on the one queue.)
SLOW = "sleep 0.1; echo ok"


def scenarios(root: Path, count: int = 1) -> Path:
    """`slow-tool` (the slow call, then the append) and, with `count = 2`, `slow-wrong`: the
    same run judged against an oracle it cannot meet, so its recording fails."""
    root.mkdir(parents=True, exist_ok=True)
    text = bash_then_append("a slow tool's output", SLOW)
    (root / "slow-tool.toml").write_text(text, encoding="utf-8")
    if count == 2:
        (root / "slow-wrong.toml").write_text(text.replace("count = 1", "count = 2"), encoding="utf-8")
    return root


@contextmanager
def primes_watched(monkeypatch: pytest.MonkeyPatch,
                   hold: threading.Event | None = None) -> Iterator[list[str]]:
    """The case ids whose recoveries were primed (`CrashStates._prime` called), in order; with
    `hold`, each waits for it to be set before it runs."""
    primed: list[str] = []
    original = CrashStates._prime

    def prime(self: CrashStates, case: Case, *args: Any) -> None:
        primed.append(case.case_id)
        if hold is not None:
            assert hold.wait(60)
        original(self, case, *args)

    monkeypatch.setattr(CrashStates, "_prime", prime)
    yield primed


@dataclass
class Ran:
    rows: dict[str, dict[str, Any]]  # each case's essentials
    tally: Tally
    left: list[str]  # what the run left in its scratch tree besides its own markers
    held: int  # bytes its states still held in the matrix's budget


def matrix_run(names: tuple[str, ...], dirs: tuple[str, ...], jobs: int, *,
               only: frozenset[str] | None = None, shard: tuple[int, int] | None = None,
               keep: bool = False, finished: threading.Event | None = None) -> Ran:
    """An in-process `--states` matrix (`finished`: set once its first result is in)."""
    rows: dict[str, dict[str, Any]] = {}
    with runner_config("durable-agent", 60.0, False, keep, resolved=adapter_named("durable-agent")) as cfg:
        matrix = Matrix(MatrixConfig(scenarios=scenarios_named(names, dirs), runner=cfg, jobs=jobs,
                                     states=True, scenario_dirs=list(dirs), only=only, shard=shard))

        def kept(result: CaseResult, known: int) -> None:
            rows[result.case] = {k: getattr(result, k) for k in KEYS}
            if finished is not None:
                finished.set()

        matrix.run(kept)
        assert matrix.states is not None
        left = sorted(str(p.relative_to(cfg.work_root)) for p in cfg.work_root.rglob("*")
                      if p.name != ".crashmatrix-scratch" and p != cfg.work_root / ".states")
        return Ran(rows, matrix.states.tally, left, matrix.states.budget.held)


def test_primed_recoveries_give_every_case_the_result_an_unprimed_run_gives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = (str(scenarios(tmp_path / "scenarios")),)
    # One job: the recording holds it, so no slot is idle and nothing is primed.
    with primes_watched(monkeypatch) as primed:
        alone = matrix_run(("slow-tool",), dirs, 1)
    assert primed == []
    with primes_watched(monkeypatch) as primed:
        two = matrix_run(("slow-tool",), dirs, 2)
    # Offered as the recording passed them: in event order, before its later events.
    assert primed, "two jobs: the idle one primes recoveries while the recording runs"
    events = [int(c.split("/")[1].split(":")[0]) for c in primed]
    assert events == sorted(events)
    assert sum(two.tally.primed.values()) >= 1, "a case had a state its priming recovered"
    assert two.rows == alone.rows, "primed or not, every case's result is the same"
    assert (two.tally.points, two.tally.distinct) == (alone.tally.points, alone.tally.distinct)
    assert two.left == []
    assert two.held == 0


def test_a_filtered_or_sharded_matrix_primes_only_what_it_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = (str(scenarios(tmp_path / "scenarios")),)
    everything = matrix_run(("slow-tool",), dirs, 1).rows
    wanted = frozenset(c for c in everything if c.endswith("/kill") and "effect.after:bash" in c)
    assert len(wanted) == 1, sorted(everything)
    with primes_watched(monkeypatch) as primed:
        rows = matrix_run(("slow-tool",), dirs, 2, only=wanted).rows
    # Offered before the recording's own end reaches the matrix (one queue, in order): primed.
    assert primed == sorted(wanted)
    assert {c: rows[c] for c in wanted} == {c: everything[c] for c in wanted}
    # A shard places cases by their position in the whole list (not known before the end), and
    # a kept case directory is a case's own: neither primes.
    with primes_watched(monkeypatch) as primed:
        matrix_run(("slow-tool",), dirs, 2, shard=(1, 2))
        matrix_run(("slow-tool",), dirs, 2, keep=True)
    assert primed == []


def test_a_recording_that_fails_its_oracle_leaves_no_primed_recovery_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = (str(scenarios(tmp_path / "scenarios", count=2)),)
    # The priming waits until the recording's result is in: it then runs on after its recording.
    finished = threading.Event()
    with primes_watched(monkeypatch, hold=finished) as primed:
        ran = matrix_run(("slow-wrong",), dirs, 2, finished=finished)
    assert primed, "primed while the recording ran, before its oracle failed"
    assert list(ran.rows) == ["slow-wrong/none"]
    assert ran.rows["slow-wrong/none"]["verdict"].value == "fail"
    assert sum(ran.tally.primed.values()) == 0
    assert sum(ran.tally.points.values()) == 0
    assert ran.left == [], "the scratch tree holds no case directory and no state"
    assert ran.held == 0, "what the primed recovery kept for cases was let go with its scenario"


def test_no_more_agents_run_at_once_than_jobs_and_a_judged_case_holds_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted at the runner: incarnations at once (an intruder runs while its host is frozen,
    within the host's job), for a downstream scenario whose cases run from scratch under
    --states, and for one whose cases start from states."""
    running = 0
    most = 0
    lock = threading.Lock()
    original = runner_module.CaseRunner.run_incarnation

    def counted(self: runner_module.CaseRunner, args: list[str], spec: Any, record: Any,
                *rest: Any, **kw: Any) -> None:
        nonlocal running, most
        if record.intruder:
            original(self, args, spec, record, *rest, **kw)
            return
        with lock:
            running += 1
            most = max(most, running)
        try:
            original(self, args, spec, record, *rest, **kw)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(runner_module.CaseRunner, "run_incarnation", counted)
    rows = matrix_run(("email-keyed", "changelog-fast"), (), 2).rows
    assert len(rows) > 20
    assert most == 2, f"{most} agents ran at once with --jobs 2"
