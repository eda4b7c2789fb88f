"""Per-case fault schedule: the one piece of state in the fake, deterministic given the requests."""

from __future__ import annotations

import threading

from crashmatrix.fakes.conversation import Conversation, holds
from crashmatrix.scenarios.model import Fault


class FaultSchedule:
    """Each fault fires on the first `times` requests whose conversation meets its condition.

    Faults are tried in file order; a request gets at most one fault.
    """

    def __init__(self, faults: tuple[Fault, ...]) -> None:
        self._faults = faults
        self._left = [f.times for f in faults]
        self._lock = threading.Lock()

    def left(self) -> tuple[int, ...]:
        """How many times each fault may still fire (its state, for a snapshot)."""
        with self._lock:
            return tuple(self._left)

    def restore(self, left: tuple[int, ...]) -> None:
        with self._lock:
            self._left = list(left)

    def take(self, conv: Conversation) -> Fault | None:
        with self._lock:
            for i, fault in enumerate(self._faults):
                if self._left[i] > 0 and holds(fault.when, conv):
                    self._left[i] -= 1
                    return fault
        return None
