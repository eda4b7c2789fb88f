"""The progress line: a floor while cases are still enumerated, then a stable total and an ETA."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.adapters.registry import resolve_agent
from crashmatrix.harness.cli.progress import Progress, eta
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.runner import RunnerConfig
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.scenarios import resolve
from crashmatrix.scenarios.model import Scenario
from tests.unit.test_reports_data import make


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Stream(io.StringIO):
    encoding = "utf-8"  # StringIO has none; a terminal's

    @property
    def last(self) -> str:
        return self.getvalue().rsplit("\r", 1)[-1]


def progress(stream: io.StringIO, clock: Clock) -> Progress:
    return Progress(stream, enabled=True, clock=clock)


def test_a_floor_has_no_eta_and_a_stable_total_has_one() -> None:
    clock, out = Clock(), Stream()
    p = progress(out, clock)
    for _ in range(10):
        clock.now += 1
        p.update(True, 40, final=False)
    assert "10/≥40 cases" in out.last
    assert "ETA" not in out.last
    clock.now += 1
    p.update(False, 100, final=True)
    assert "11/100 cases  1 failed" in out.last
    # One case a second: 89 left.
    assert out.last.removesuffix("\x1b[K").endswith("ETA 1m29s")


def test_the_eta_follows_the_recent_rate_not_the_whole_run() -> None:
    clock, out = Clock(), Stream()
    p = progress(out, clock)
    clock.now += 600  # a slow start: recording the scenarios
    p.update(True, 10, final=False)
    for _ in range(100):
        clock.now += 0.5  # then two cases a second
        p.update(True, 1000, final=True)
    assert "2.0/s" in out.last
    assert "ETA 7m30s" in out.last


def test_results_a_resume_found_saved_count_as_done_but_not_in_the_rate() -> None:
    clock, out = Clock(), Stream()
    p = progress(out, clock)
    for _ in range(500):  # handed over at once, as a resumed matrix does
        p.update(True, 1000, final=True, ran=False)
    for _ in range(10):
        clock.now += 1  # then one case a second
        p.update(True, 1000, final=True)
    assert "510/1000 cases" in out.last
    assert "1.0/s" in out.last
    assert "ETA 8m10s" in out.last  # 490 left at one a second, not at 500 a second


def test_ascii_streams_get_an_ascii_floor_and_a_disabled_bar_writes_nothing() -> None:
    clock = Clock()
    ascii_out = Stream()
    ascii_out.encoding = "ascii"
    progress(ascii_out, clock).update(True, 5)
    assert "1/>=5 cases" in ascii_out.last
    quiet = Stream()
    Progress(quiet, enabled=False, clock=clock).update(True, 5, final=True)
    assert quiet.getvalue() == ""


def test_eta_is_compact() -> None:
    assert [eta(s) for s in (4.6, 80, 7325)] == ["5s", "1m20s", "2h02m"]


# --- when the matrix knows its total ----------------------------------------------------------

class NoProvider:
    def register(self, case_key: str, scenario: Scenario) -> str:
        raise AssertionError("no case runs an agent here")

    def requests(self, case_key: str) -> list[Any]:
        return []

    def forget(self, case_key: str) -> None:
        pass


class Scripted(Matrix):
    """Every case answers at once with a result shaped like the harness's (no agent runs)."""

    def run_case(self, case: Case) -> CaseResult:
        return make(case)


@pytest.mark.parametrize("depth", [1, 2])
def test_the_matrix_says_when_its_total_is_final(tmp_path: Path, depth: int) -> None:
    runner = RunnerConfig(adapter=resolve_agent("durable-agent"), provider=NoProvider(), work_root=tmp_path)
    scenarios = resolve(("changelog",), [])
    assert scenarios[0].matrix.crash_loop <= 1, "a crash loop would enumerate more at depth 1"
    matrix = Scripted(MatrixConfig(scenarios=scenarios, runner=runner, depth=depth, jobs=1))
    seen: list[tuple[int, bool]] = []
    matrix.run(lambda result, known: seen.append((known, matrix.enumerated)))
    final = [known for known, done in seen if done]
    assert set(final) == {len(seen)}, "once final, the total is every case run"
    first_final = next(i for i, (_, done) in enumerate(seen) if done)
    assert all(done for _, done in seen[first_final:]), "final stays final"
    if depth == 1:
        assert first_final == 0, "recording done, every single-crash case is known"
    else:
        assert first_final > 0, "a floor while recoveries enumerate"
        assert seen[0][0] < len(seen)
