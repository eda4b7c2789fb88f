"""How far the runner lets an agent run ahead: never past a crash point or a pending delivery."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from crashmatrix.harness.execution.permits import RUN_AHEAD, grant, pending
from crashmatrix.harness.records.case import CrashStep
from crashmatrix.harness.records.observation import Delivery
from crashmatrix.scenarios import load_builtin

SCENARIOS = load_builtin()


@dataclass
class FakeIncarnation:
    """Records grants the way Incarnation does; the agent reports `events_read` events."""

    events_read: int = 0
    granted: int = 0
    grants: list[int] = field(default_factory=list)

    def permit_through(self, n: int) -> None:
        if n > self.granted:
            self.grants.append(n - self.granted)
            self.granted = n


def _drive(step: CrashStep | None, total_events: int, scenario: str = "changelog-fast",
           delivered_at: int | None = None) -> FakeIncarnation:
    """Play an agent that reports an event whenever it holds a permit (or none is needed
    yet), and the runner's grants after each event; stop at the crash point."""
    inc, sc = FakeIncarnation(), SCENARIOS[scenario]
    deliveries: list[Delivery] = []
    grant(inc, step, pending(sc, deliveries))
    while inc.events_read < total_events:
        # The agent may report the next event only if it was permitted through the last one.
        assert inc.events_read <= inc.granted, "the agent ran past its permits"
        inc.events_read += 1
        if step is not None and inc.events_read == step.n:
            assert inc.granted == step.n - 1, "a permit was granted for the crash event"
            return inc
        if delivered_at is not None and inc.events_read == delivered_at:
            assert inc.granted == inc.events_read - 1, "ran past a pending delivery boundary"
            deliveries += [Delivery("input", i.id, i.text, 1, delivered_at) for i in sc.inputs]
            deliveries += [Delivery("cancel", c.id, "", 1, delivered_at) for c in sc.cancels]
        grant(inc, step, pending(sc, deliveries))
    return inc


@given(st.integers(1, 3 * RUN_AHEAD), st.integers(0, 3 * RUN_AHEAD))
def test_a_crash_point_is_never_granted_and_batches_stay_small(n: int, extra: int) -> None:
    inc = _drive(CrashStep(n, "commit.written", "x"), n + extra)
    assert inc.events_read == n
    assert all(0 < g <= RUN_AHEAD + 1 for g in inc.grants)


@given(st.integers(1, 4 * RUN_AHEAD))
def test_a_finishing_incarnation_runs_ahead_in_bounded_batches(total: int) -> None:
    inc = _drive(None, total)
    assert inc.events_read == total
    assert all(0 < g <= RUN_AHEAD + 1 for g in inc.grants)
    assert len(inc.grants) <= 2 + total // (RUN_AHEAD // 2)  # batches, not one grant per event


@given(st.integers(1, 40))
def test_while_a_delivery_is_pending_the_agent_goes_one_event_at_a_time(at: int) -> None:
    inc = _drive(None, at + 50, scenario="queued-input", delivered_at=at)
    # One event at a time up to the delivery boundary (events 1..at-1 each got one permit;
    # event `at` waited for the delivery), then it runs ahead.
    assert inc.grants[:at - 1] == [1] * (at - 1)
    assert inc.grants[at - 1] > 1
    assert all(0 < g <= RUN_AHEAD + 1 for g in inc.grants)
