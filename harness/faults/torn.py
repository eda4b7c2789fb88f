"""`torn`: killed at `commit.written`, then the half-written last line of the store is torn.

It stands for a crash (or a power loss) in the middle of the write: the store keeps only part of
its last record. It is enumerated only where a write can be half done.
"""

from __future__ import annotations

from crashmatrix.harness.adapters.interface import Adapter, Capability, LaunchSpec
from crashmatrix.harness.faults.interface import AtCrash, Frozen, Observed

TORN_AT = "commit.written"  # the only boundary where a write can be half done


class Torn:
    name = "torn"
    requires = frozenset({Capability.KILL, Capability.TEAR})
    at_crash = AtCrash.KILL
    observes = False
    by_default = True
    at_store_calls = False  # it tears the write a commit.written probe names

    def enumerated_at(self, kind: str, label: str) -> bool:
        return kind == TORN_AT

    def apply(self, adapter: Adapter, spec: LaunchSpec) -> None:
        adapter.tear(spec)

    def while_frozen(self, frozen: Frozen) -> None:
        pass  # a KILL fault is never frozen

    def apply_observed(self, observed: Observed) -> None:
        pass  # never observes


TORN = Torn()
