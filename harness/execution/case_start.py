"""A case begun from a crash state, and the capture of the states cases begin from (`--states`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from crashmatrix.fakes.case import CaseState
from crashmatrix.harness.execution.states import Snapshot, take
from crashmatrix.harness.records.observation import Delivery, IncarnationRecord


@dataclass(frozen=True)
class Start:
    """A case begun from a crash state (`--states`): its directory restored from a snapshot and
    its fault applied, the incarnations before it as the state's own run recorded them (the last
    one killed there), and whether the task was in the store (the next one recovers)."""

    case_dir: Path
    provider: CaseState
    prefix: list[IncarnationRecord]
    workspace_before: dict[str, str]
    accepted: bool
    deliveries: tuple[Delivery, ...] = ()  # the inputs and cancels delivered up to the state


@dataclass
class Capture:
    """Snapshots of the tree at every event of incarnation `incarnation`, kept in memory."""

    incarnation: int
    snaps: dict[int, Snapshot] = field(default_factory=dict)
    # The settle run changed nothing (no byte, no request): a recover from the final state is
    # that run again, whatever its role (freeze_chain.py reuses it).
    settle_unchanged: bool = False
    # Set by the runner as the case runs: the incarnation being captured (its events so far) and
    # the workspace before the case's first incarnation. With them a case can start from a
    # snapshot while this run goes on (crash_states.py, primed recoveries).
    live: IncarnationRecord | None = None
    workspace_before: dict[str, str] | None = None

    def take(self, case_dir: Path, provider: CaseState, incarnation: int, event: int) -> None:
        self.snaps[event] = take(case_dir, provider, incarnation, event, self.snaps.get(event - 1))
