"""Distinct failures: failing cases grouped by cause (invariants, crash boundary kind, fault)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from crashmatrix.harness.records.case import Case, CaseIdError, CrashStep
from crashmatrix.harness.records.results import CaseResult

# The boundary and fault of a case that crashes nowhere (`changelog/none`), or whose id does not
# parse (a hand-edited results file): still a group of its own, never dropped.
NO_CRASH = "none"
UNKNOWN = "?"


@dataclass(frozen=True, order=True)
class GroupKey:
    """What a failure is, without where exactly it happened: cases with one key are one cause.

    `boundary` and `fault` join the steps of a deeper schedule with `+` (`effect.after+commit.written`,
    `kill+torn`), so a depth-2 case is grouped with those that crash at the same kinds of boundary."""

    invariants: tuple[str, ...]  # the violated invariants, sorted; empty for a verdict without any
    verdict: str  # fail, nondeterministic, error, scenario-error
    boundary: str  # the probe event kind crashed at, e.g. effect.after
    fault: str  # kill, torn, ...

    @property
    def cause(self) -> str:
        """The invariants violated, or for a verdict that violates none, that verdict."""
        return ", ".join(self.invariants) or self.verdict

    @property
    def label(self) -> str:
        """One line for a reader: `at-most-once at effect.after (kill)`."""
        what = self.cause
        where = "with no crash" if self.boundary == NO_CRASH else f"at {self.boundary} ({self.fault})"
        return f"{what} {where}"


@dataclass(frozen=True)
class FailureGroup:
    key: GroupKey
    cases: tuple[CaseResult, ...]  # in case id order


def steps_of(case_id: str) -> tuple[CrashStep, ...] | None:
    """A case id's crash steps (`Case.parse`, the one parser), or None for an id that does not
    parse (a hand-edited results file): every report reads case ids through this."""
    try:
        return Case.parse(case_id).schedule
    except CaseIdError:
        return None


def faults_of(case_id: str) -> tuple[str, ...]:
    """The fault kinds a case's crash steps use, each once, sorted (none for an unreadable id)."""
    return tuple(sorted({s.fault for s in steps_of(case_id) or ()}))


def group_key(result: CaseResult) -> GroupKey:
    """The cause of `result` (for any verdict; a passing case has `verdict` pass)."""
    schedule = steps_of(result.case)
    if schedule is None:
        boundary = fault = UNKNOWN
    else:
        boundary = "+".join(s.kind for s in schedule) or NO_CRASH
        fault = "+".join(s.fault for s in schedule) or NO_CRASH
    return GroupKey(tuple(result.invariants), result.verdict.value, boundary, fault)


def distinct_failures(results: Iterable[CaseResult]) -> list[FailureGroup]:
    """The failing cases (every verdict but pass) by cause: largest group first, then by key, so
    the order does not depend on the order cases finished in."""
    groups: dict[GroupKey, list[CaseResult]] = {}
    for r in results:
        if not r.ok:
            groups.setdefault(group_key(r), []).append(r)
    return [FailureGroup(key, tuple(sorted(cases, key=lambda r: r.case)))
            for key, cases in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
