"""One holder frozen at several points in turn, each intruder judged clean or not (`--states`).

A FREEZE case (`second`) at event n of incarnation d runs d up to n, freezes it, runs an intruder
beside it, resumes it and lets it run to its end; then the usual recovery and settle. Run as a
real case, every such case repeats incarnation d up to its point.

With `--states`, one *host* (incarnation d, started from the same state as its parent's) stands
for all of them: it is frozen at the first point, the intruder runs, and the tree and the
provider's state are hashed before and after. When they are byte-identical the intruder was
clean: the holder's world is as if nothing had happened, so the rest of that case is its parent's
own run from event n on (the parent's incarnation d ran unfrozen from the same state), and the
host goes on to the next point. The first intruder that changes something ends the sharing: the
host runs on as that point's case, a real one, and the points after it run as real kills. So an
agent that refuses a second writer costs one host and one intruder per point; one that does not
costs what real kills cost.

Sound for the same reason a crash state is: the agent declares `state-in-tree` (its behaviour is
a function of what it can observe), and `--audit-states` re-runs a sample as real cases.
A point's observation is its parent's run with the clean intrusion in it (`with_intrusion`), or
the host's run with the point's own earlier incarnations (`as_case`).
"""

from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import Future
from dataclasses import dataclass

from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.observation import Delivery, IncarnationRecord, Intrusion, Observation


@dataclass(frozen=True)
class Outcome:
    """What the host learnt of one point: `clean` (the intruder changed nothing, its record), or
    `observation` (it changed something: the host ran on as this point's case); neither: the
    host never got there cleanly, and the point runs as a real case."""

    clean: Intrusion | None = None
    observation: Observation | None = None


class FreezeChain:
    """The points of one FREEZE fault in one incarnation, in event order, and their outcomes."""

    def __init__(self, steps: list[CrashStep]) -> None:
        self.steps = sorted(steps, key=lambda s: s.n)
        self.outcomes: dict[int, Future[Outcome]] = {s.n: Future() for s in self.steps}
        self.perturbed: int | None = None  # the point whose intruder changed something
        self.done = False  # every point was clean: the host need not run on
        self._lock = threading.Lock()

    @property
    def first(self) -> CrashStep:
        return self.steps[0]

    def frozen(self, n: int, before: str, after: str, intrusions: list[Intrusion]) -> CrashStep | None:
        """After the intruder at point `n` (the tree's keys `before` and `after` it; the host's
        intrusions, the last one its): the host's next point, or None (it runs on as this point's
        case, or, `done`, it can stop)."""
        if before != after:
            self.perturbed = n
            for step in self.steps:
                if step.n > n:
                    self._set(step.n, Outcome())
            return None
        # Clean: this point's case is its parent's run with the intrusion in it; the host keeps
        # none of it (a later point's case, should it run on, had only its own intruder).
        self._set(n, Outcome(clean=intrusions.pop()))
        following = next((s for s in self.steps if s.n > n), None)
        self.done = following is None
        return following

    def finish(self, observation: Observation | None) -> None:
        """The host ended (or failed: None): the perturbed point gets its observation, and any
        point not yet settled runs as a real case."""
        for n in self.outcomes:
            self._set(n, Outcome(observation=observation if n == self.perturbed else None))

    def _set(self, n: int, outcome: Outcome) -> None:
        with self._lock:
            future = self.outcomes[n]
            if not future.done():
                future.set_result(outcome)


def with_intrusion(parent: Observation, case: Case, intrusion: Intrusion) -> Observation:
    """A FREEZE case whose intruder was clean: its parent's observation, with the finishing
    incarnation frozen at the point and its intrusion recorded, and the parent's settle (which
    changed nothing) standing for both the recovery after it and its own settle."""
    d, n = case.depth, case.schedule[-1].n
    settle = parent.incarnations[d]
    incarnations = [*parent.incarnations[:d - 1],
                    dataclasses.replace(parent.incarnations[d - 1], frozen_at=n),
                    dataclasses.replace(settle, index=d + 1, settle=False),
                    dataclasses.replace(settle, index=d + 2, settle=True)]
    return dataclasses.replace(parent, case=case, incarnations=incarnations, intrusions=[intrusion])


def as_case(host: Observation, case: Case, parent_incarnations: list[IncarnationRecord],
            workspace_before: dict[str, str], parent_deliveries: list[Delivery]) -> Observation:
    """The host's run as `case`'s: the host may have been started for another parent of the
    group (the same state, reached through other incarnations), so the earlier incarnations,
    the workspace before them and their deliveries are the case's own parent's."""
    d = case.depth
    earlier = [x for x in parent_deliveries if x.incarnation < d]
    return dataclasses.replace(host, case=case, workspace_before=workspace_before,
                               incarnations=[*parent_incarnations[:d - 1], *host.incarnations[d - 1:]],
                               deliveries=[*earlier, *(x for x in host.deliveries if x.incarnation >= d)])
