"""Derived views of the probe trace: where each commit landed, who committed it, who asked what."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar, cast

from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.observation import IncarnationRecord, Observation, Request
from crashmatrix.harness.records.violation import event_ref, event_text
from crashmatrix.scenarios.model import BoundaryKind

# Probe events are totally ordered by (incarnation, event number): incarnations never overlap,
# because the session lock admits one writer at a time.
Pos = tuple[int, int]

K = BoundaryKind
V = TypeVar("V")
# The kinds as plain strings, looked up once: a StrEnum member read costs a descriptor call, and
# the indexes below read them for every event of every case.
_COMMIT_LANDS = frozenset({K.COMMIT_WRITTEN.value, K.COMMIT_AFTER.value})
_EFFECT_BEFORE, _EFFECT_AFTER = K.EFFECT_BEFORE.value, K.EFFECT_AFTER.value
_PROVIDER_BEFORE = K.PROVIDER_BEFORE.value


@dataclass(frozen=True)
class Located:
    """A probe event together with the incarnation that reported it."""

    inc: int
    event: ProbeEvent

    @property
    def pos(self) -> Pos:
        return (self.inc, self.event.n)

    @property
    def kind(self) -> str:
        return self.event.kind

    @property
    def label(self) -> str:
        return self.event.label

    @property
    def ref(self) -> str:
        return event_ref(self.inc, self.event)

    @property
    def text(self) -> str:
        return event_text(self.inc, self.event)

    @property
    def call_id(self) -> str | None:
        value = self.event.detail.get("call_id")
        return None if value is None else str(value)

    @property
    def recovery(self) -> bool:
        return bool(self.event.detail.get("recovery"))

    @property
    def seq(self) -> int | None:
        value = self.event.detail.get("seq")
        return value if isinstance(value, int) and not isinstance(value, bool) else None


class Trace:
    """Indexes over one observation's probe events. Checks get theirs from `Trace.of`, which
    `verify` makes return one shared instance for the observation it is judging; views several
    checks derive from it (the call table, each site's effects) are built once on it (`view`)."""

    @staticmethod
    def of(obs: Observation) -> Trace:
        shared = _shared.get()
        if shared is not None and shared.obs is obs:
            return shared
        return Trace(obs)

    def __init__(self, obs: Observation) -> None:
        self.obs = obs
        self.events: list[Located] = [Located(i, e) for i, e in obs.all_events()]
        # Each kind's events, in trace order, indexed once: checks ask for a kind (or the effects)
        # many times per case, and scanning every event each time was a fifth of judging one.
        self._by_kind: dict[str, list[Located]] = {}
        for located in self.events:
            self._by_kind.setdefault(located.event.kind, []).append(located)
        self._effects: list[Located] | None = None
        self._views: dict[Callable[[Trace], object], object] = {}
        self._landed = _landed_commits(self.events) if obs.store_read else _landed_replies(self.events, obs)

    def view(self, build: Callable[[Trace], V]) -> V:
        """`build(self)`, built on the first call and kept: a view several checks derive from
        the observation is built once per judgement. `build` must be pure and its result is
        shared: callers must not change it."""
        if build not in self._views:
            self._views[build] = build(self)
        return cast(V, self._views[build])

    # -- commits ---------------------------------------------------------------------------
    def commit_pos(self, seq: int) -> Pos | None:
        landed = self._landed.get(seq)
        return None if landed is None else landed.pos

    def owner(self, seq: int) -> int | None:
        """The incarnation that wrote commit `seq`: from its commit probes, else from the store's
        size when each incarnation started (ground truth the harness measured itself)."""
        landed = self._landed.get(seq)
        if landed is not None:
            return landed.inc
        owner = None
        for inc in self.obs.incarnations:
            if inc.commits_before < seq:
                owner = inc.index
        return owner

    # -- events ----------------------------------------------------------------------------
    def of_kind(self, kind: BoundaryKind, inc: int | None = None) -> list[Located]:
        found = self._by_kind.get(kind.value, [])
        return list(found) if inc is None else [e for e in found if e.inc == inc]

    def effects(self) -> list[Located]:
        """Effect events that mean a tool began or finished. An effect.before at which the
        harness killed the agent is left out: the probe blocks before the tool runs, so that
        effect never began."""
        if self._effects is None:
            self._effects = [e for e in self.events if (kind := e.event.kind) == _EFFECT_AFTER
                             or (kind == _EFFECT_BEFORE and not self._killed_at(e))]
        return list(self._effects)

    def _killed_at(self, e: Located) -> bool:
        record = self.incarnation(e.inc)
        return record is not None and record.crashed_at == e.event.n

    # -- incarnations ----------------------------------------------------------------------
    def incarnation(self, index: int) -> IncarnationRecord | None:
        return next((i for i in self.obs.incarnations if i.index == index), None)

    @property
    def crashes(self) -> int:
        return sum(1 for i in self.obs.incarnations if i.interrupted)

    @property
    def last(self) -> IncarnationRecord | None:
        return self.obs.incarnations[-1] if self.obs.incarnations else None

    @property
    def ended_killed(self) -> bool:
        """The last incarnation was killed (by the schedule, or for hanging): the final state is
        a crash state, not an end state. A hang is liveness's verdict; other checks must not
        pile on what a crash state legitimately lacks."""
        last = self.last
        return last is not None and (last.killed or last.timed_out)

    def requests_of(self, index: int) -> list[Request]:
        """Requests the fake recorded while incarnation `index` ran (from the harness's counts)."""
        incs = self.obs.incarnations
        for k, inc in enumerate(incs):
            if inc.index == index:
                end = incs[k + 1].requests_before if k + 1 < len(incs) else len(self.obs.requests)
                return [r for r in self.obs.requests if inc.requests_before <= r.index < end]
        return []


# The trace `verify` built for the observation it is judging (per thread: matrices judge cases
# on several threads). Building it once instead of once per check was a fifth of the harness's
# CPU time per case.
_shared: ContextVar[Trace | None] = ContextVar("crashmatrix_shared_trace", default=None)


def _landed_commits(events: list[Located]) -> dict[int, Located]:
    """Where each store commit landed, by seq."""
    landed: dict[int, Located] = {}
    for located in events:
        if located.event.kind not in _COMMIT_LANDS:
            continue
        seq = located.seq
        if seq is None:
            continue
        # `written` is the moment a commit is in the file (a kill after it does not undo it);
        # `after` only confirms it. A later incarnation that writes the same seq again (after
        # a torn tail was dropped) owns the commit the final store holds.
        seen = landed.get(seq)
        if seen is None or seen.inc < located.inc:
            landed[seq] = located
    return landed


def _landed_replies(events: list[Located], obs: Observation) -> dict[int, Located]:
    """Without a store, the transcript is the provider's view (verify.provider_view): its
    "commit" k+1 is request k's reply, placed where the agent sent request k (its effects come
    after that, the previous reply's before). Only when every request has its provider.before
    can the two be lined up; else nothing is placed and sites are placed leniently."""
    sent = [e for e in events if e.event.kind == _PROVIDER_BEFORE]
    return {k + 1: e for k, e in enumerate(sent)} if len(sent) == len(obs.requests) else {}


@contextmanager
def shared_trace(obs: Observation) -> Iterator[Trace]:
    """While the block runs, `Trace.of(obs)` returns this one instance (obs must not change)."""
    trace = Trace(obs)
    token = _shared.set(trace)
    try:
        yield trace
    finally:
        _shared.reset(token)
