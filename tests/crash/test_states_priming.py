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
from crashmatrix.harness.execution import workspace_files
from crashmatrix.harness.execution.crash_states import CrashStates
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.states_tally import Tally
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult
from tests.support.bash_scenario import bash_then_append

pytestmark = pytest.mark.crash
KEYS = ("verdict", "branches", "commits", "requests", "exit_codes", "trace", "invariants", "violations")
# A tool call that takes a while: the recording runs on well after its first events. (That an
# offer is primed at all does not hang on time: it reaches the matrix before the recording's end
# does, on the one queue; that a case then finds its state primed is made sure of below.)
SLOW = "sleep 0.1; echo ok"


def scenarios(root: Path) -> Path:
    """`slow-tool` (the slow call, then the append); `slow-wrong`: the same run judged against
    an oracle it cannot meet, so its recording fails; `quick-tool`: `slow-tool` without the
    wait (for depth 2)."""
    root.mkdir(parents=True, exist_ok=True)
    text = bash_then_append("a slow tool's output", SLOW)
    (root / "slow-tool.toml").write_text(text, encoding="utf-8")
    (root / "slow-wrong.toml").write_text(text.replace("count = 1", "count = 2"), encoding="utf-8")
    quick = bash_then_append("a tool's output", "echo ok")
    (root / "quick-tool.toml").write_text(quick, encoding="utf-8")
    return root


@pytest.fixture
def recordings_wait_for_a_priming(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recording's run returns only once a priming has run (or none was offered): its cases,
    enumerated after that, then find at least one state primed, however loaded the machine."""
    original = CrashStates._prime
    primed = threading.Event()

    def prime(self: CrashStates, *args: Any) -> None:
        try:
            original(self, *args)
        finally:
            primed.set()

    def record(self: CrashStates, case: Case, *args: Any, **kwargs: Any) -> Any:
        obs = original_record(self, case, *args, **kwargs)
        if case.depth == 0 and kwargs.get("priming") is not None:
            assert primed.wait(60)
        return obs

    original_record = CrashStates.record
    monkeypatch.setattr(CrashStates, "_prime", prime)
    monkeypatch.setattr(CrashStates, "record", record)


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
               keep: bool = False, finished: threading.Event | None = None, depth: int = 1,
               faults: tuple[str, ...] | None = None) -> Ran:
    """An in-process `--states` matrix (`finished`: set once its first result is in)."""
    rows: dict[str, dict[str, Any]] = {}
    with runner_config("durable-agent", 60.0, False, keep, resolved=adapter_named("durable-agent")) as cfg:
        matrix = Matrix(MatrixConfig(scenarios=scenarios_named(names, dirs), runner=cfg, jobs=jobs,
                                     states=True, scenario_dirs=list(dirs), only=only, shard=shard,
                                     depth=depth, faults=faults))

        def kept(result: CaseResult, known: int) -> None:
            rows[result.case] = {k: getattr(result, k) for k in KEYS}
            if finished is not None:
                finished.set()

        matrix.run(kept)
        assert matrix.states is not None
        left = sorted(str(p.relative_to(cfg.work_root)) for p in cfg.work_root.rglob("*")
                      if p.name != ".crashmatrix-scratch" and p != cfg.work_root / ".states")
        return Ran(rows, matrix.states.tally, left, matrix.states.budget.held)


@pytest.mark.usefixtures("recordings_wait_for_a_priming")
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


@pytest.mark.usefixtures("recordings_wait_for_a_priming")
def test_at_depth_two_the_cases_of_a_primed_state_extend_as_an_unprimed_run_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A primed recovery of a case that may be extended keeps its snapshots for the case's
    own crash points (the case splices them): its depth-2 cases are those of an unprimed run.
    Kills only: a thousand cases instead of two."""
    dirs = (str(scenarios(tmp_path / "scenarios")),)
    alone = matrix_run(("quick-tool",), dirs, 1, depth=2, faults=("kill",))
    two = matrix_run(("quick-tool",), dirs, 2, depth=2, faults=("kill",))
    assert sum(two.tally.primed.values()) >= 1
    assert max(c.count("/") for c in two.rows) == 3, "depth-2 cases ran"
    assert two.rows == alone.rows
    # And as many of them started from states: a primed state's case had snapshots to give.
    assert (two.tally.points, two.tally.distinct) == (alone.tally.points, alone.tally.distinct)
    assert two.held == 0


def test_a_priming_that_fails_fails_the_run_as_a_case_would(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = (str(scenarios(tmp_path / "scenarios")),)

    def broken(self: CrashStates, case: Case, *args: Any) -> None:
        raise RuntimeError(f"a harness bug priming {case.case_id}")

    monkeypatch.setattr(CrashStates, "_prime", broken)
    with pytest.raises(RuntimeError, match="a harness bug priming slow-tool/"):
        matrix_run(("slow-tool",), dirs, 2)


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
    # A shard places cases by their position in the whole list (not known before the end), a
    # kept case directory is a case's own, and a scenario's inputs are delivered at events (the
    # cases at an event are not its steps alone): none of them primes.
    with primes_watched(monkeypatch) as primed:
        matrix_run(("slow-tool",), dirs, 2, shard=(1, 2))
        matrix_run(("slow-tool",), dirs, 2, keep=True)
        matrix_run(("queued-input",), dirs, 2)
    assert primed == []


def test_a_recording_that_fails_its_oracle_leaves_no_primed_recovery_behind(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dirs = (str(scenarios(tmp_path / "scenarios")),)
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

    # Which threads hold a job, and whether any judged a case while it held one.
    holders: set[int] = set()
    judged_holding: list[str] = []

    class Held:
        def __init__(self, slots: threading.BoundedSemaphore) -> None:
            self.slots = slots

        def __enter__(self) -> None:
            self.slots.acquire()
            holders.add(threading.get_ident())

        def __exit__(self, *exc: object) -> None:
            holders.discard(threading.get_ident())
            self.slots.release()

    original_init = Matrix.__init__
    original_evaluate = Matrix._evaluate

    def init(self: Matrix, config: MatrixConfig) -> None:
        original_init(self, config)
        self.slots = Held(self.slots)  # type: ignore[assignment]
        if self.states is not None:
            self.states.running = self.slots

    def evaluate(self: Matrix, obs: Any, *args: Any) -> Any:
        if threading.get_ident() in holders:
            judged_holding.append(obs.case.case_id)
        return original_evaluate(self, obs, *args)

    original_snapshot = workspace_files.snapshot

    def snapshot(workspace: Path) -> dict[str, str]:
        if threading.get_ident() in holders:
            judged_holding.append(f"{workspace}: its workspace read")
        return original_snapshot(workspace)

    monkeypatch.setattr(runner_module.CaseRunner, "run_incarnation", counted)
    monkeypatch.setattr(Matrix, "__init__", init)
    monkeypatch.setattr(Matrix, "_evaluate", evaluate)
    monkeypatch.setattr(runner_module, "snapshot", snapshot)
    rows = matrix_run(("email-keyed", "changelog-fast"), (), 2).rows
    assert len(rows) > 20
    assert most == 2, f"{most} agents ran at once with --jobs 2"
    assert judged_holding == [], "a case's workspace is read, and the case judged, after it let its job go"
