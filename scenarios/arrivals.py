"""Arrival timing: a scenario's input or cancel moved to every kind of point a run can be in.

A scenario delivers each input and cancel at one boundary it chose (`at`). An agent that mishandles
an item arriving anywhere else (while it polls, mid-commit, while a tool runs) passes that
scenario. `points` lists the kinds of point of a run (each distinct `kind:label` of its first
incarnation, in order of first occurrence) that come before its last inbox poll, from a run of the
scenario *without* the item: the run is the same as the variant's up to the point, so the item is
delivered there in the variant, and a later poll can see it. `variant` moves the item there.

What each variant must end in (docs/invariants.md, "Arrival timing"):
- an input: the scenario's expectations as written (a poll after the arrival sees it, so the run
  must act on it wherever it arrived);
- a cancel: the expected outcome as written (the open run closes cancelled); the scenario's file,
  line, pattern, record, turn, final-answer, applied and check expectations are not judged, since
  where a cancel cuts the run decides what the files and services hold. The queued-input
  invariant judges the cancel itself: the run it found open closes cancelled, no tool begins
  after the poll that could see it, and nothing resumes it.

A variant's crash points are those from its item's arrival on (`after_arrival`): before it, the
variant's run is the run without the item, and a recovery from there may never pass the point.

A variant is named `<scenario>~<item>@<kind>:<label>` and is rebuilt from its name (`named`), so
its case ids replay with `crashmatrix repro` like any other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import msgspec

from crashmatrix.scenarios.model import Boundary, BoundaryKind, Expect, Scenario

MARK, AT = "~", "@"


@dataclass(frozen=True)
class Arrival:
    """One item of a scenario, delivered at another boundary."""

    base: str
    item: str
    at: Boundary

    @property
    def name(self) -> str:
        return f"{self.base}{MARK}{self.item}{AT}{self.at}"


def items(scenario: Scenario) -> list[str]:
    """The ids of the scenario's inputs and cancels, in the order the file gives them."""
    return [i.id for i in scenario.inputs] + [c.id for c in scenario.cancels]


def at_of(scenario: Scenario, item: str) -> Boundary:
    """Where the scenario itself delivers the item."""
    found = [i.at for i in scenario.inputs if i.id == item] + [c.at for c in scenario.cancels if c.id == item]
    if not found:
        raise ValueError(f"scenario {scenario.name!r} has no input or cancel {item!r}")
    return found[0]


def without(scenario: Scenario, item: str) -> Scenario:
    """The scenario with one item never delivered: the run the item's points are read from."""
    return msgspec.structs.replace(scenario, inputs=tuple(i for i in scenario.inputs if i.id != item),
                                   cancels=tuple(c for c in scenario.cancels if c.id != item))


def points(events: Iterable[tuple[str, str]]) -> list[Boundary]:
    """The kinds of point of a run, from its first incarnation's events (`kind`, `label`): each
    distinct boundary, in order of first occurrence, that comes before the run's last inbox poll
    (an item arriving later is seen by no poll of the run). Recovery branches are reports, not
    places a run waits at; a label with '/' or a blank would not survive in a case id."""
    seen = list(events)
    polls = [k for k, (kind, _) in enumerate(seen) if kind == BoundaryKind.INBOX_POLL.value]
    if not polls:
        return []
    out: dict[tuple[str, str], Boundary] = {}
    for kind, label in seen[:polls[-1]]:
        if kind == BoundaryKind.RECOVERY_BRANCH.value or (kind, label) in out:
            continue
        if not label or "/" in label or any(ch.isspace() for ch in label) or MARK in label:
            continue
        try:
            out[kind, label] = Boundary(BoundaryKind(kind), label)
        except ValueError:  # an agent's own kind of event: no boundary a scenario can name
            continue
    return list(out.values())


def variant(scenario: Scenario, arrival: Arrival) -> Scenario:
    """The scenario with `arrival.item` delivered at `arrival.at`, expecting what the rule says."""
    if arrival.base != scenario.name or arrival.item not in items(scenario):
        raise ValueError(f"scenario {scenario.name!r} has no input or cancel {arrival.item!r}")
    inputs = tuple(msgspec.structs.replace(i, at=arrival.at) if i.id == arrival.item else i
                   for i in scenario.inputs)
    cancels = tuple(msgspec.structs.replace(c, at=arrival.at) if c.id == arrival.item else c
                    for c in scenario.cancels)
    expect = scenario.expect
    if any(c.id == arrival.item for c in scenario.cancels):
        # Where the cancel cuts the run decides the files, the records, what a downstream
        # service applied and what a check hook reads: only the outcome is the rule's to keep.
        expect = Expect(outcome=scenario.expect.outcome)
    return msgspec.structs.replace(scenario, name=arrival.name, inputs=inputs, cancels=cancels,
                                   expect=expect)


def parse(name: str) -> Arrival | None:
    """The arrival a variant's name stands for; None for a name that is not a variant's."""
    base, mark, rest = name.partition(MARK)
    item, at, boundary = rest.partition(AT)
    if not mark or not at or not base or not item or ":" not in boundary or MARK in boundary:
        return None  # a variant of a variant is no name this module gives
    try:
        return Arrival(base, item, Boundary.parse(boundary))
    except ValueError:
        return None


def named(name: str, known: Mapping[str, Scenario]) -> Scenario | None:
    """The variant `name` stands for, built from its scenario in `known`; None when it is not a
    variant's name, or names a scenario or item that is not there."""
    arrival = parse(name)
    if arrival is None or arrival.base not in known:
        return None
    base = known[arrival.base]
    if arrival.item not in items(base):
        return None
    return variant(base, arrival)


def after_arrival(scenario: str, first_incarnation: list[str]) -> int | None:
    """For a variant, the event (numbered from 1) of its recording's first incarnation at which
    its item arrived: its crash points start there (a kill at that event comes after the
    delivery, as always). 0 for a scenario that is no variant (every point); None for a variant
    whose recording never reached its point (no crash point: its crash-free case says why)."""
    arrival = parse(scenario)
    if arrival is None:
        return 0
    return first_at(((kind, label) for kind, _, label in (p.partition(":") for p in first_incarnation)),
                    arrival.at)


def first_at(events: Iterable[tuple[str, str]], at: Boundary) -> int | None:
    """The number (from 1) of the first event (`kind`, `label`) `at` matches: where the harness
    delivers an item whose boundary is `at`. None: no event matches."""
    return next((n for n, (kind, label) in enumerate(events, 1) if at.matches(kind, label)), None)
