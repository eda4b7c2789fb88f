"""Drive a real `durable-agent` subprocess over the probe channel and SIGKILL it at an event."""

from __future__ import annotations

import time

from crashmatrix.harness.execution.incarnation import Incarnation
from crashmatrix.harness.records.events import ProbeEvent
from tests.support.agent_env import Paths, launch


def run_and_kill(paths: Paths, url: str | None, *extra: str, at: str | int,
                 timeout: float = 30.0) -> list[ProbeEvent]:
    """Ack events until the one matching `at` ("kind:label", or an event number), then kill there.

    Returns the events up to and including the crash point. Fails if the point is never reached.
    """
    deadline = time.monotonic() + timeout
    events: list[ProbeEvent] = []
    with Incarnation(launch(paths, url, *extra)) as inc:
        while True:
            event = inc.next_event(deadline)
            if event is None:
                raise AssertionError(f"agent exited before reaching {at!r}; saw {[e.point for e in events]}")
            events.append(event)
            if at in (event.point, event.n):
                inc.kill()
                return events
            inc.ack()


def run_to_end(
    paths: Paths, url: str | None, *extra: str, timeout: float = 30.0
) -> tuple[int, list[ProbeEvent]]:
    deadline = time.monotonic() + timeout
    events: list[ProbeEvent] = []
    with Incarnation(launch(paths, url, *extra)) as inc:
        while (event := inc.next_event(deadline)) is not None:
            events.append(event)
            inc.ack()
        return inc.wait(deadline), events
