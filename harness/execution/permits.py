"""How far an incarnation may run past the events read: permits ahead, and deliveries at events.

An agent needs one permit per probe event and stops at the first it holds none for (agent/probe.py).
The runner grants them in batches, up to just before a crash point, so the events in between cost
no round trip; while a scenario input or cancel waits for its boundary, it grants one at a time,
and the item is delivered while the agent waits at the event it names.
"""

from __future__ import annotations

from typing import Any, Protocol

from crashmatrix.harness.adapters.interface import Adapter, LaunchSpec
from crashmatrix.harness.records.observation import Delivery
from crashmatrix.scenarios.model import Scenario

# Permits granted at a time to an incarnation that is to run to its end.
RUN_AHEAD = 256


class Permitted(Protocol):
    """What `grant` needs of an incarnation (incarnation.Incarnation)."""

    @property
    def events_read(self) -> int: ...

    @property
    def granted(self) -> int: ...

    def permit_through(self, n: int) -> None: ...


def grant(inc: Permitted, step: Any, pending: bool) -> None:
    """Let the agent past the events read so far, and ahead as far as nothing needs doing.

    While a scenario input or cancel is still to be delivered, the agent goes one event at a
    time: the item must land while the agent waits at its boundary. Otherwise it runs ahead
    to just before the crash point (or freely, when this incarnation finishes), and the
    events in between cost no round trip; they are still read and checked in order.
    """
    done = inc.events_read
    if pending:
        inc.permit_through(done)
        return
    # Permits go out in batches (a pipe holds 64 KiB), topped up as events are read.
    if inc.granted - done < RUN_AHEAD // 4:
        target = done + RUN_AHEAD
        inc.permit_through(target if step is None else max(done, min(target, step.n - 1)))


def pending(scenario: Scenario, deliveries: list[Delivery]) -> bool:
    """Whether an input or cancel of the scenario is still to be delivered."""
    done = {d.item_id for d in deliveries}
    return any(i.id not in done for i in scenario.inputs) or any(
        c.id not in done for c in scenario.cancels)


def deliver(adapter: Adapter, event: Any, spec: LaunchSpec, index: int, scenario: Scenario,
            deliveries: list[Delivery]) -> None:
    """Deliver what of the scenario is due at `event` of incarnation `index`, and record it."""
    done = {d.item_id for d in deliveries}
    for item in scenario.inputs:
        if item.id not in done and item.at.matches(event.kind, event.label):
            adapter.deliver(spec, "input", item.id, item.text)
            deliveries.append(Delivery("input", item.id, item.text, index, event.n))
    for cancel in scenario.cancels:
        if cancel.id not in done and cancel.at.matches(event.kind, event.label):
            adapter.deliver(spec, "cancel", cancel.id, "")
            deliveries.append(Delivery("cancel", cancel.id, "", index, event.n))
