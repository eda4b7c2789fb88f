"""The fault-kind contract: where a fault is enumerated, what it does, and what it needs.

A fault kind is any object with these members, registered under the entry-point group
`crashmatrix.faults` (see `crashmatrix.harness.plugins`). Every fault first kills the
incarnation at its crash point (SIGKILL of the process group, at the probe event); `apply` then
changes what the dead agent left behind before the next incarnation starts.
"""

from __future__ import annotations

from typing import Protocol

from crashmatrix.harness.adapters.interface import Adapter, Capability, LaunchSpec


class FaultKind(Protocol):
    name: str  # as written in case ids: `.../07:commit.written:run_started/torn`
    requires: frozenset[Capability]  # an adapter lacking one is never given this fault

    def enumerated_at(self, kind: str, label: str) -> bool:
        """Whether the single-crash matrix crashes with this fault at a recorded event. Pure."""
        ...

    def apply(self, adapter: Adapter, spec: LaunchSpec) -> None:
        """Act on the case tree once the incarnation is dead (a plain kill does nothing)."""
        ...
