"""Recovery-path coverage: which declared recovery branches the cases reached, and which never."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from crashmatrix.harness.records.results import CaseResult


class BranchStatus(StrEnum):
    REACHED = "reached"
    UNREACHED = "unreached"  # declared, but no case reached it
    UNDECLARED = "undeclared"  # reached, but the agent does not declare it (a stale list)


@dataclass(frozen=True)
class BranchCoverage:
    branch: str
    cases: int  # how many cases reached the branch (in any incarnation)
    example_case: str | None
    declared: bool = True

    @property
    def status(self) -> BranchStatus:
        if not self.declared:
            return BranchStatus.UNDECLARED
        return BranchStatus.REACHED if self.cases else BranchStatus.UNREACHED


def _example_key(case: CaseResult) -> tuple[int, str, str]:
    # The shallowest, earliest crash is the easiest example to follow; the key is total, so the
    # choice does not depend on the order results finished in.
    return (case.depth, case.scenario, case.case)


def branch_coverage(results: Iterable[CaseResult], declared: Sequence[str]) -> list[BranchCoverage]:
    """Every declared branch in declared order, then undeclared reached branches sorted by name."""
    counts: dict[str, int] = {}
    examples: dict[str, CaseResult] = {}
    for r in results:
        for branch in set(r.branches):
            counts[branch] = counts.get(branch, 0) + 1
            best = examples.get(branch)
            if best is None or _example_key(r) < _example_key(best):
                examples[branch] = r

    def row(branch: str, declared_: bool) -> BranchCoverage:
        example = examples.get(branch)
        return BranchCoverage(branch, counts.get(branch, 0), example.case if example else None, declared_)

    listed = list(dict.fromkeys(declared))  # a branch declared twice is still one row
    extra = sorted(set(counts) - set(listed))
    return [row(b, True) for b in listed] + [row(b, False) for b in extra]


def unreached(results: Iterable[CaseResult], declared: Sequence[str]) -> list[str]:
    """The declared branches no case reached, in declared order."""
    return [c.branch for c in branch_coverage(results, declared) if c.status is BranchStatus.UNREACHED]


# What an empty branch table means: the agent declares no recovery branch and no probe reported
# one, so there is nothing to count (not "0 of 0 reached", which reads as a result).
NO_BRANCHES = ("No recovery branch to report: the agent's adapter declares none "
               "(`declared_branches()`) and no case's probes reported one. Declaring them "
               "(docs/your-agent.md) shows which recovery paths the matrix reached.")
