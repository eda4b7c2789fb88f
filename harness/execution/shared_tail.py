"""What a shared recovery produced (`--states`: one recovery per distinct crash state), and how
it becomes each case's own observation: the case's prefix up to its kill, then the recovery's,
its requests renumbered to follow the case's."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from crashmatrix.fakes.records import RequestRecord
from crashmatrix.harness.execution import states
from crashmatrix.harness.execution.runner import request_of
from crashmatrix.harness.execution.snapshot_capture import Why
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.observation import Delivery, IncarnationRecord, Observation


@dataclass
class SharedTail:
    """What a shared recovery produced: read by every case with its state key."""

    observation: Observation
    depth: int
    snaps: dict[int, states.Snapshot] = field(default_factory=dict)
    origin: tuple[states.Snapshot, str] | None = None
    settle_unchanged: bool = False
    requests_before: int = 0  # the owner's requests before the recovery (its snapshot's log)
    dir_name: str = ""  # the owner's case directory: the observation's paths name it
    refused: dict[int, Why] = field(default_factory=dict)
    witnessed: dict[int, dict[str, str]] = field(default_factory=dict)


def spliced(tail: SharedTail, case: Case, prefix: list[IncarnationRecord],
            workspace_before: dict[str, str], delivered: list[Delivery],
            snap: states.Snapshot) -> tuple[Observation, dict[int, states.Snapshot]]:
    """A shared recovery as `case`'s own: its own incarnations, deliveries and requests up to the
    kill (the same items, maybe at other events, and maybe fewer or more requests: the key leaves
    the log out), then the recovery's, its requests renumbered to follow the case's. The
    recovery's snapshots (for the case's own crash points in it) get the case's log the same way.
    The case's requests are written in the terms of the owner's directory, as the rest is."""
    d, seen, before = tail.depth, tail.observation, tail.requests_before
    own = states.renamed(snap.provider, snap.dir_name, tail.dir_name).records
    shift = len(own) - before

    def moved(inc: IncarnationRecord) -> IncarnationRecord:
        return dataclasses.replace(inc, requests_before=inc.requests_before + shift) if shift else inc

    def logged(records: tuple[RequestRecord, ...]) -> tuple[RequestRecord, ...]:
        return (*own, *(dataclasses.replace(r, index=r.index + shift) for r in records[before:]))

    obs = dataclasses.replace(
        seen, case=case, workspace_before=workspace_before,
        incarnations=[*prefix, *(moved(i) for i in seen.incarnations[d:])],
        deliveries=[*delivered, *(x for x in seen.deliveries if x.incarnation > d)],
        requests=[*(request_of(i, r) for i, r in enumerate(own)),
                  *(dataclasses.replace(q, index=q.index + shift) for q in seen.requests[before:])],
        intrusions=[dataclasses.replace(x, requests_after=x.requests_after + shift,
                                        record=moved(x.record)) for x in seen.intrusions])
    snaps = {n: dataclasses.replace(s, provider=dataclasses.replace(s.provider,
                                                                    records=logged(s.provider.records)))
             for n, s in tail.snaps.items()}
    return obs, snaps
