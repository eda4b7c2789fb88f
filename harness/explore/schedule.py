"""Maps a drawn crash step onto an observed incarnation trace: the concrete CrashStep. Pure.

A draw is an index into the incarnation's events ordered by how much a crash there tends to
matter: effects first, then the commit boundaries, then requests, inbox polls and recovery
branches (each group in trace order). Small indices name the same kind of point whatever else
the plan holds, so when Hypothesis shrinks an index toward 0, or drops a turn before it, the
crash stays at (or moves toward) the first effect rather than jumping to an unrelated event.
"""

from __future__ import annotations

from dataclasses import dataclass

from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.torn import TORN
from crashmatrix.harness.records.case import CrashStep
from crashmatrix.scenarios.model import BoundaryKind as K

PRIORITY: tuple[K, ...] = (
    K.EFFECT_AFTER, K.EFFECT_BEFORE, K.COMMIT_WRITTEN, K.COMMIT_AFTER, K.COMMIT_BEFORE,
    K.PROVIDER_AFTER, K.PROVIDER_BEFORE, K.INBOX_POLL, K.RECOVERY_BRANCH,
)


@dataclass(frozen=True)
class Draw:
    """A crash step before its incarnation has run: which event (an index into the ordered
    events, modulo their number) and which fault. A torn write picks among commit.written."""

    index: int
    fault: str = KILL.name  # a built-in fault kind: kill or torn


def _rank(kind: str) -> int:
    values = [k.value for k in PRIORITY]
    return values.index(kind) if kind in values else len(values)


def ordered(points: list[str]) -> list[tuple[int, str]]:
    """The events (numbered from 1) in draw order: by kind priority, then by position."""
    numbered = list(enumerate(points, 1))
    return sorted(numbered, key=lambda np: (_rank(np[1].partition(":")[0]), np[0]))


def pick_step(points: list[str], draw: Draw) -> CrashStep | None:
    """The step `draw` names in an incarnation whose events were `points` (`kind:label`); None
    when the incarnation reported no event, so nothing can crash there."""
    candidates = ordered(points)
    fault = draw.fault
    if fault == TORN.name:
        written = [(n, p) for n, p in candidates if TORN.enumerated_at(*p.split(":", 1))]
        # No commit in this incarnation: a torn write is impossible here, so kill instead.
        candidates, fault = (written, fault) if written else (candidates, KILL.name)
    if not candidates:
        return None
    n, point = candidates[draw.index % len(candidates)]
    kind, _, label = point.partition(":")
    return CrashStep(n, kind, label, fault)
