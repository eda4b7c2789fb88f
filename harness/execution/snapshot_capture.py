"""One recording's snapshots within the caps of snapshot_limits.py; past them, crash points run as real kills.

An incarnation that loops (a retry far past its limit) emits thousands of events, each a crash
point, each changing the log a little: a snapshot at each is the whole growing tree again, and
the matrix held 5 GB before it was stopped. A recording keeps at most `Limits.states` snapshots,
holding at most `Limits.held_bytes` between them (a file unchanged from the previous snapshot is
shared, and counted once), and reads at most `Limits.read_bytes` to take them. What the matrix
keeps for later cases, until their scenario is done, is held to `Limits.matrix_bytes` (`Budget`):
the snapshots of every recording with children, and every recovery kept for sharing, whose requests
each carry the agent's history (a runaway's recoveries were most of those 5 GB). Once a cap is
reached a recording takes no snapshot (it reads nothing more), each later crash point says why it
had no state, and a recovery is not kept for others (they run their own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from crashmatrix.fakes.case import CaseState
from crashmatrix.harness.execution.case_start import Capture
from crashmatrix.harness.execution.snapshot_audit import contents
from crashmatrix.harness.execution.snapshot_limits import LIMITS, Limits, Refusal, Refused, sized
from crashmatrix.harness.execution.states import Snapshot, take
from crashmatrix.harness.records.observation import Observation

Why = tuple[Refusal, str]  # a refusal and its detail
# What a snapshot costs besides its files: the object, and the provider state's tuple of the
# request log and lists of stored responses (pointers to records every snapshot shares).
SNAPSHOT_BYTES = 512
POINTER_BYTES = 8
# What a kept observation costs, measured (deep sizes) on a runaway's recoveries: per request and
# per message besides its text, per probe event, per item read back from the agent's store.
REQUEST_BYTES = 1024
MESSAGE_BYTES = 512
EVENT_BYTES = 576
STORE_ITEM_BYTES = 400
SPLICED_REQUEST_BYTES = 160  # a copy renumbering a request, its messages shared


class Budget:
    """What the snapshots of a matrix's recordings hold together, against `Limits.matrix_bytes`.
    Thread-safe: recordings run at once."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held = 0
        self._lock = threading.Lock()

    def charge(self, n: int) -> bool:
        """Hold `n` bytes more; False (and nothing held) when that would pass the cap."""
        with self._lock:
            if self.held + n > self.cap:
                return False
            self.held += n
            return True

    def release(self, n: int) -> None:
        with self._lock:
            self.held -= n


@dataclass
class BoundedCapture(Capture):
    """`Capture` with the caps of one recording, charging what it keeps to the matrix's `budget`
    (`held`: what it charged; the caller releases it with the snapshots). `refused` says, for each
    event with no snapshot, why. `witness` (`--audit-states`): beside each snapshot, the tree as
    the audit's own reader saw it there (`witnessed`), for the audit to hold the restored state
    against."""

    limits: Limits = LIMITS
    budget: Budget | None = None
    witness: bool = False
    refused: dict[int, Why] = field(default_factory=dict)
    witnessed: dict[int, dict[str, str]] = field(default_factory=dict)
    held: int = 0  # bytes its snapshots hold between them
    read: int = 0  # bytes read to take them
    # Told each event whose snapshot was kept, while the agent still waits there (the run's
    # thread): a case can start from it before the run ends (crash_states.py, primed recoveries).
    on_kept: Callable[[int], None] | None = field(default=None, repr=False)
    _last: Snapshot | None = field(default=None, repr=False)
    _stopped: Why | None = field(default=None, repr=False)

    def take(self, case_dir: Path, provider: CaseState, incarnation: int, event: int) -> None:
        if self._stopped is None and len(self.snaps) >= self.limits.states:
            self._stopped = (Refusal.STATES, f"its recording kept {len(self.snaps)} snapshots, the cap")
        if self._stopped is not None:
            self.refused[event] = self._stopped
            return
        try:
            snap = take(case_dir, provider, incarnation, event, self._last, self.limits)
        except Refused as exc:  # this state only: the next event's may be within bounds again
            self.refused[event] = (exc.reason, exc.detail)
            return
        self.read += snap.tree.held
        shared = self._last is not None and snap.tree is self._last.tree
        cost = (0 if shared else snap.tree.fresh) + _provider_bytes(provider)
        if self.held + cost > self.limits.held_bytes:
            self._stop(event, Refusal.HELD, f"its recording's snapshots would hold "
                                            f"{sized(self.held + cost)}, over the "
                                            f"{sized(self.limits.held_bytes)} cap")
            return
        if self.budget is not None and not self.budget.charge(cost):
            self._stop(event, Refusal.MATRIX, f"the matrix's snapshots hold {sized(self.budget.held)}, "
                                              f"the {sized(self.budget.cap)} cap")
            return
        self.held += cost
        self.snaps[event] = self._last = snap
        if self.witness:
            self.witnessed[event] = contents(case_dir)
        if self.on_kept is not None:
            self.on_kept(event)
        if self.read >= self.limits.read_bytes:  # this one was read already: kept, and the last
            self._stopped = (Refusal.READ, f"its recording read {sized(self.read)} to take its "
                                           f"snapshots, the {sized(self.limits.read_bytes)} cap")

    def _stop(self, event: int, reason: Refusal, detail: str) -> None:
        self._stopped = self.refused[event] = (reason, detail)


def _provider_bytes(provider: CaseState) -> int:
    pointers = len(provider.records) + sum(len(v) for v in provider.responses.values())
    return SNAPSHOT_BYTES + POINTER_BYTES * pointers


def observation_bytes(obs: Observation, shallow: bool = False) -> int:
    """About what keeping `obs` holds: its requests (each with the history it was sent with), its
    incarnations' events and what was read of the agent's store. `shallow`: a copy of another
    kept observation, sharing all but its list of renumbered requests (`crash_states._spliced`)."""
    if shallow:
        return SNAPSHOT_BYTES + SPLICED_REQUEST_BYTES * len(obs.requests)
    store = obs.transcript
    items = len(store.runs) + len(store.messages) + len(store.starts) + len(store.records) + len(store.labels)
    return (SNAPSHOT_BYTES + REQUEST_BYTES * len(obs.requests) + STORE_ITEM_BYTES * items
            + EVENT_BYTES * sum(len(i.events) for i in obs.incarnations)
            + sum(MESSAGE_BYTES + len(str(m.get("content") or "")) for q in obs.requests for m in q.messages))
