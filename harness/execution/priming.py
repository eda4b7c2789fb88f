"""Primed recoveries (`--states`): a recording offers its cases as it passes them, to start early.

A recording keeps a snapshot at every event (snapshot_capture.py), and the cases at an event are
named from that event alone (`enumeration.steps_at`): the same case ids its finished trace gives.
So each event whose snapshot was kept offers its KILL cases (`offering`), each with the call that
recovers its state; the matrix runs the call in a job no case holds or waits for (matrix.py),
and `CrashStates` recovers the state in a directory of its own (`primed_dir_name`). The case,
enumerated from the finished trace as always, finds its state owned and splices that recovery as
it would another case's, so no result changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crashmatrix.harness.enumeration import steps_at
from crashmatrix.harness.execution.runner import case_dir_name
from crashmatrix.harness.execution.snapshot_capture import BoundedCapture
from crashmatrix.harness.faults.interface import AtCrash, FaultKind, at_crash_of, injecting, observes_of
from crashmatrix.harness.records.case import Case

# Offered a case whose recovery can start now, and the call that starts it (given whether the
# case may be extended); the matrix decides whether it wants that case and runs the call.
Offer = Callable[[Case, Callable[[bool], None]], None]


@dataclass(frozen=True)
class Priming:
    """A recording's crash cases, started while it runs (`CrashStates.record`): the matrix's fault
    kinds (those `primable` are offered) and where to offer each case."""

    faults: Sequence[FaultKind]
    offer: Offer


def primable(fault: FaultKind) -> bool:
    """Whether a case whose last step is `fault` can have its recovery primed: one `run` starts
    from its parent's snapshot (a plain KILL fault, as `CrashStates.usable` has it)."""
    return at_crash_of(fault) is AtCrash.KILL and not observes_of(fault) and injecting(fault) is None


def primed_dir_name(case: Case) -> str:
    """The directory a primed recovery of `case` runs in: named as case directories are, and
    never the case's own."""
    return case_dir_name(case, "primed\0")


def offering(recording: Case, capture: BoundedCapture, priming: Priming, room: Callable[[], bool],
             primer: Callable[[Case], Callable[[bool], None]]) -> Callable[[int], None]:
    """What the recording's capture calls at each event whose snapshot it kept (the agent waits
    there): while `room()` says so, the cases at that event are offered, each with the call
    `primer` gives for it."""
    faults = [f for f in priming.faults if primable(f)]

    def kept(n: int) -> None:
        # The runner sets `live` before the incarnation's first event, and takes a snapshot right
        # after reading an event: the last event is the one kept.
        live = capture.live
        assert live is not None
        assert live.events[-1].n == n
        if not room():
            return
        for step in steps_at(n, live.events[-1].point, faults):
            case = Case(recording.scenario, (step,))
            priming.offer(case, primer(case))
    return kept
