"""The report's view of distinct failures (reports/groups.py): labels, filters, which cases to draw."""

from __future__ import annotations

from collections.abc import Sequence

from crashmatrix.harness.records.results import Verdict
from crashmatrix.reports.groups import FailureGroup
from crashmatrix.reports.html_base import worst


def verdict_of(group: FailureGroup) -> Verdict:
    return worst([r.verdict for r in group.cases])


def scenarios_of(group: FailureGroup) -> list[str]:
    return sorted({r.scenario for r in group.cases})


def drawn_in_full(found: Sequence[FailureGroup], limit: int) -> set[str]:
    """The cases whose whole timeline the page draws, at most `limit`: first one per group (every
    distinct failure gets one), then the others in page order."""
    chosen: list[str] = [g.cases[0].case for g in found][:limit]
    for g in found:
        for r in g.cases[1:]:
            if len(chosen) >= limit:
                return set(chosen)
            chosen.append(r.case)
    return set(chosen)
