"""What a run proved, as facts: invariants checked, faults, depth, failures, coverage, files written."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.records.results import CaseResult, not_applicable
from crashmatrix.harness.records.run_record import LineCoverageRecord, ScenarioStates, StatesRecord
from crashmatrix.reports import groups
from crashmatrix.reports.coverage import BranchStatus, branch_coverage
from crashmatrix.reports.groups import distinct_failures, steps_of


@dataclass(frozen=True)
class BranchFacts:
    """Recovery-branch coverage in numbers: reached of declared, and the names a reader acts on."""

    reached: int
    declared: int
    unreached: tuple[str, ...]  # declared, never reached (declared order)
    undeclared: tuple[str, ...]  # reached, not declared: the agent's list is stale
    # Why branches could not be seen at all (a black-box run: branches are probe events); None
    # when they were measured.
    unmeasured: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"reached": self.reached, "declared": self.declared, "unreached": list(self.unreached),
                "undeclared": list(self.undeclared), "unmeasured": self.unmeasured}


@dataclass(frozen=True)
class RunFacts:
    # Judged (at least in part) and exercised by some case, in registry order; when no record
    # says what it exercised (older results), every judged one, and `exercise_known` is False.
    invariants: tuple[str, ...]
    partly: tuple[str, ...]  # of those, the ones judged only in part (the reason is in not_applicable)
    not_applicable: dict[str, str]  # invariant -> why it was not (fully) judged
    faults: tuple[str, ...]
    depth: int
    cases: int
    distinct_failures: int
    coverage: BranchFacts
    files: tuple[Path, ...]
    duration_s: float | None = None  # known only to the process that ran the cases
    lines: LineCoverageRecord | None = None  # run.json's line_coverage, when it was measured
    # Judged on every case, but no case's situation called for them: they held vacuously.
    never_exercised: tuple[str, ...] = ()
    exercise_known: bool = True

    @property
    def unjudged(self) -> tuple[str, ...]:
        """The invariants not judged at all (never counted as checked)."""
        return tuple(i for i in self.not_applicable if i not in self.partly)

    def to_json(self) -> dict[str, Any]:
        """The keys `run --json` adds to the summary object (README documents them)."""
        return {"invariants": list(self.invariants), "never_exercised": list(self.never_exercised),
                "faults": list(self.faults), "depth": self.depth,
                "distinct_failures": self.distinct_failures,
                "duration_s": None if self.duration_s is None else round(self.duration_s, 1),
                "coverage": self.coverage.to_json(), "files": [str(p) for p in self.files],
                "line_coverage": None if self.lines is None else self.lines.to_json()}


def _unjudged(results: Sequence[CaseResult]) -> tuple[set[str], set[str]]:
    """The invariants some case could not judge at all, and those some case judged only in part."""
    whole: set[str] = set()
    part: set[str] = set()
    for r in results:
        for item in r.not_applicable:
            (part if item.get("partly") else whole).add(item["invariant"])
    return whole, part - whole


def faults_of(results: Iterable[CaseResult]) -> tuple[str, ...]:
    """The fault kinds the case ids schedule, sorted (a crash-free or unreadable id has none)."""
    return tuple(sorted({f for r in results for f in groups.faults_of(r.case)}))


BLIND = ("not measured: the agent ran without probes (--black-box), and recovery branches are "
         "reported by probes")


def branch_facts(results: Sequence[CaseResult], declared: Sequence[str]) -> BranchFacts:
    rows = branch_coverage(results, declared)
    listed = [c for c in rows if c.declared]
    blind = any(r.store_calls or any(s.blackbox for s in steps_of(r.case) or ()) for r in results)
    return BranchFacts(
        reached=sum(1 for c in listed if c.status is BranchStatus.REACHED), declared=len(listed),
        unreached=tuple(c.branch for c in listed if c.status is BranchStatus.UNREACHED),
        undeclared=tuple(c.branch for c in rows if c.status is BranchStatus.UNDECLARED),
        unmeasured=BLIND if blind else None)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def scenario_states(s: ScenarioStates) -> str:
    """One scenario's line of run.json's `crash_states`, in the words every report uses."""
    text = f"{_n(s.points, 'crash point')} from {_n(s.states, 'distinct state')}"
    if s.second_process_points or s.hosts:
        text += f"; {_n(s.second_process_points, 'second-process point')} from {_n(s.hosts, 'host')}"
    return text


def settles_reused(record: StatesRecord) -> str:
    """The run-wide part of `crash_states`, and what its counts leave out."""
    text = (f"{_n(record.settles_reused, 'settle run')} reused "
            "(a byte-identical final state had settled before)")
    if record.resumed:
        text += (f"; counts only the cases this invocation ran, not the {record.resumed} kept "
                 "from the run it resumed")
    return text


def run_facts(results: Sequence[CaseResult], registry: Sequence[str], declared: Sequence[str],
              depth: int | None, files: Sequence[Path], duration_s: float | None = None,
              lines: LineCoverageRecord | None = None) -> RunFacts:
    """`registry`: every invariant the verifier runs, in its order (the CLI passes it in: renderers
    import no verifier). An invariant some case reports not applicable is not counted as checked:
    it was never held there; nor is one no case exercised (it held vacuously: the situation it
    judges never arose), which is listed apart. With no results nothing was checked. `depth`:
    the run's --depth, or None to take the deepest case's."""
    whole, part = _unjudged(results)
    judged = tuple(i for i in registry if i not in whole) if results else ()
    known = [r.exercised for r in results if r.exercised is not None]
    arose = {i for names in known for i in names}
    checked = tuple(i for i in judged if i in arose) if known else judged
    return RunFacts(
        invariants=checked, partly=tuple(i for i in checked if i in part),
        never_exercised=tuple(i for i in judged if i not in checked),
        exercise_known=bool(known) or not results,
        not_applicable=not_applicable(results), faults=faults_of(results),
        depth=depth if depth is not None else max((r.depth for r in results), default=0),
        cases=len(results), distinct_failures=len(distinct_failures(results)),
        coverage=branch_facts(results, declared), files=tuple(files), duration_s=duration_s,
        lines=lines)
