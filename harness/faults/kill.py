"""`kill`: SIGKILL of the agent's process group at the probe event, at every recorded event.

In black-box mode, also at every store call the recording made: the SIGKILL lands as the agent
enters the call, which therefore never runs.

A SIGKILL keeps the page cache: everything the agent wrote survives, synced or not.
"""

from __future__ import annotations

from crashmatrix.harness.adapters.interface import Adapter, Capability, LaunchSpec
from crashmatrix.harness.faults.interface import AtCrash, Frozen, Observed


class Kill:
    name = "kill"
    requires = frozenset({Capability.KILL})
    at_crash = AtCrash.KILL
    observes = False
    by_default = True
    # In black-box mode, killed as it enters a store call (strace delivers the SIGKILL).
    at_store_calls = True

    def enumerated_at(self, kind: str, label: str) -> bool:
        return True

    def apply(self, adapter: Adapter, spec: LaunchSpec) -> None:
        pass  # the kill itself is the whole fault

    def while_frozen(self, frozen: Frozen) -> None:
        pass  # a KILL fault is never frozen

    def apply_observed(self, observed: Observed) -> None:
        pass  # never observes


KILL = Kill()
