"""`kill`: SIGKILL of the agent's process group at the probe event, at every recorded event.

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

    def enumerated_at(self, kind: str, label: str) -> bool:
        return True

    def apply(self, adapter: Adapter, spec: LaunchSpec) -> None:
        pass  # the kill itself is the whole fault

    def while_frozen(self, frozen: Frozen) -> None:
        pass  # a KILL fault is never frozen

    def apply_observed(self, observed: Observed) -> None:
        pass  # never observes


KILL = Kill()
