"""What a scenario asks of an adapter's capabilities: refused up front, never skipped. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from crashmatrix.harness.adapters.interface import Adapter, Capability
from crashmatrix.scenarios.model import Scenario


class Unsupported(ValueError):
    """A case asks an adapter for a capability it does not declare (a usage error)."""


def unmet(adapter: Adapter, scenarios: Iterable[Scenario]) -> list[str]:
    """One sentence per scenario that needs a capability the adapter does not declare."""
    out = []
    for s in scenarios:
        if (s.inputs or s.cancels) and Capability.INBOX not in adapter.capabilities:
            what = " and ".join(w for w, items in (("inputs", s.inputs), ("cancels", s.cancels)) if items)
            out.append(f"scenario {s.name!r} delivers {what} while the agent runs, but agent "
                       f"{adapter.name!r} declares no {Capability.INBOX.value!r} capability "
                       f"(a durable inbox the harness can deliver to)")
    return out
