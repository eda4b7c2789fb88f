"""Enumeration: crash points from recorded traces, extensions to deeper schedules, shards. Pure."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from crashmatrix.harness.faults.interface import (
    FaultKind,
    at_request,
    at_store_calls_of,
    at_syscall_points_of,
    injecting,
    observes_of,
)
from crashmatrix.harness.records.blackbox_points import crash_points, syscall_crash_points, syscall_refused
from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.scenarios.arrivals import after_arrival
from crashmatrix.scenarios.arrivals import parse as arrival_of


def steps_from_trace(points: list[str], faults: Sequence[FaultKind]) -> list[CrashStep]:
    """At every recorded event (`kind:label`, numbered from 1), each fault that is enumerated
    there, in the given order (the registry's: by name, so `kill` then `torn`)."""
    steps = []
    for n, point in enumerate(points, 1):
        steps += steps_at(n, point, faults)
    return steps


def steps_at(n: int, point: str, faults: Sequence[FaultKind]) -> list[CrashStep]:
    """The steps at event `n` (`kind:label`): each fault acting at events that is enumerated
    there. An event's steps depend on that event alone, so a case at it can be named before
    its recording has finished (crash_states.py, primed recoveries)."""
    kind, _, label = point.partition(":")
    return [CrashStep(n, kind, label, f.name) for f in faults
            if at_request(f) is None and f.enumerated_at(kind, label)]


def requests_of(result: CaseResult, index: int) -> list[str]:
    """The downstream requests (`kind:service`) incarnation `index` (0-based) of a result made."""
    return result.downstream[index] if len(result.downstream) > index else []


def calls_of(result: CaseResult, index: int) -> list[str]:
    """The system-call points incarnation `index` (0-based) of a result listed (`--syscalls`)."""
    return result.syscall_points[index] if len(result.syscall_points) > index else []


def downstream_steps(requests: Sequence[str], faults: Sequence[FaultKind]) -> list[CrashStep]:
    """At every downstream request of an incarnation (`kind:service`, numbered from 1), each
    fault that acts at downstream requests and is enumerated at that kind of request."""
    steps = []
    at_requests = [f for f in faults if at_request(f) is not None]
    for n, point in enumerate(requests, 1):
        kind, _, service = point.partition(":")
        steps += [CrashStep(n, kind, service, f.name, downstream=True)
                  for f in at_requests if f.enumerated_at(kind, service)]
    return steps


def injected_steps(points: list[str], faults: Sequence[FaultKind]) -> list[CrashStep]:
    """The system calls of a recorded first incarnation each injecting fault makes fail."""
    return [step for f in faults if (inject := injecting(f)) is not None for step in inject.steps(points)]


def syscall_steps(store_calls: Sequence[str], faults: Sequence[FaultKind],
                  settle: bool = False) -> list[CrashStep]:
    """`--syscalls`: at each store call of a traced incarnation, each fault that acts at a system
    call (a kill, a power loss) and is not enumerated at the probe event that stands for it
    (`execution.syscall_points`: a `SAME` point); no observing fault where another thread
    stored too. The step counts the main thread's calls of that syscall, probes on.

    `settle`: the calls are a settle's (the recover run on finished work), whose probe events
    are no crash points: every call is one, and the steps are settle steps (`fNN`)."""
    at_calls = [f for f in faults if at_syscall_points_of(f)]
    if syscall_refused(store_calls):
        at_calls = [f for f in at_calls if not observes_of(f)]
    steps = []
    for n, syscall, file, event, ordinal in syscall_crash_points(store_calls):
        kind, _, label = (event or "").partition(":")
        steps += [CrashStep(n, syscall, file, f.name, syscall=True, settle=settle, ordinal=ordinal)
                  for f in at_calls if settle or event is None or not f.enumerated_at(kind, label)]
    return steps


def single_crash_cases(scenario: str, first_incarnation: list[str],
                       faults: Sequence[FaultKind], requests: Sequence[str] = (),
                       store_calls: Sequence[str] = (), settle_calls: Sequence[str] = ()) -> list[Case]:
    """A case at every crash point of the recording, then one per injected call (those count the
    first incarnation's calls, so they are never steps of a deeper schedule: `extensions`), then
    one per fault at each of its downstream `requests` (`kind:service`), then (`--syscalls`) one
    per fault at each of its system-call points (`store_calls`, a traced first incarnation's),
    then one per fault at each of its settle's (`settle_calls`)."""
    arrived = after_arrival(scenario, first_incarnation)
    if arrived is None:
        return []
    if arrived:
        # An arrival variant: crash points from its item's arrival on (scenarios/arrivals.py).
        # Injected calls, downstream requests and system calls are counted apart from events, so
        # no such step can be placed after the arrival: they are the scenario's own cases.
        return [Case(scenario, (step,)) for step in steps_from_trace(first_incarnation, faults)
                if step.n >= arrived]
    steps = (steps_from_trace(first_incarnation, faults) + injected_steps(first_incarnation, faults)
             + downstream_steps(requests, faults) + syscall_steps(store_calls, faults)
             + syscall_steps(settle_calls, faults, settle=True))
    return [Case(scenario, (step,)) for step in steps]


def blackbox_cases(scenario: str, store_calls: list[str], faults: Sequence[FaultKind]) -> list[Case]:
    """Black-box mode: a case at each store call of the recorded first incarnation (`syscall:file`,
    in the order they were made), for each fault that can act there; the step counts that
    syscall's calls on that file (`b03:fsync:session.jsonl`: the third fsync of the log), which
    is what strace's injection counts, so a case needs no recording to be run again. Calls the
    recording only counts or refused (`blackbox.store_points`) are no crash point."""
    cases = []
    for point, n in crash_points(store_calls):
        syscall, _, file = point.partition(":")
        cases += [Case(scenario, (CrashStep(n, syscall, file, f.name, blackbox=True),))
                  for f in faults if at_store_calls_of(f)]
    return cases


def extensions(case: Case, trace: list[list[str]], faults: Sequence[FaultKind],
               requests: Sequence[Sequence[str]] = (),
               store_calls: Sequence[Sequence[str]] = ()) -> list[Case]:
    """Cases that crash once more, at every event (and downstream request: `requests`, and
    system-call point: `store_calls`, per incarnation) of the incarnation that finished `case`,
    and at every system-call point of its settle (the incarnation after it).

    Incarnation depth+1 (index `case.depth` in the trace) is the recovery that completed the
    work; its events are exactly the points a further crash can hit. A case that crashed its
    settle has none: nothing after a settle is crashed.
    """
    if len(trace) <= case.depth or case.crashes_settle:
        return []
    steps = steps_from_trace(trace[case.depth], faults)
    if len(requests) > case.depth:
        steps += downstream_steps(requests[case.depth], faults)
    if len(store_calls) > case.depth and arrival_of(case.scenario) is None:
        # An arrival variant's crash points are events from its arrival on (single_crash_cases).
        steps += syscall_steps(store_calls[case.depth], faults)
        if len(store_calls) > case.depth + 1:
            steps += syscall_steps(store_calls[case.depth + 1], faults, settle=True)
    return [case.extend(step) for step in steps]


def crash_loop_extension(case: Case, trace: list[list[str]], loop: int,
                         requests: Sequence[Sequence[str]] = ()) -> Case | None:
    """Crash again at the first event (or downstream request, for a downstream step: `requests`,
    per incarnation) of the finishing incarnation that repeats the last crash point: the schedule
    of an agent that keeps dying at the same step (`[matrix] crash_loop`)."""
    if not case.schedule or case.depth >= loop or len(trace) <= case.depth or case.crashes_settle:
        return None
    last = case.schedule[-1]
    points = trace[case.depth] if not last.downstream else (
        requests[case.depth] if len(requests) > case.depth else [])
    for n, point in enumerate(points, 1):
        if point == last.point:
            # A variant is of the state its own run left: the repeat finds its own.
            return case.extend(dataclasses.replace(last, n=n, variant=None))
    return None


def variant_siblings(case: Case, variants: Sequence[str]) -> list[Case]:
    """The case with its last step's fault in each variant its run offered (`power-subsets`:
    which unsynced blocks reached the disk); none for a step that is a variant already."""
    if not case.schedule or case.schedule[-1].variant is not None:
        return []
    *before, last = case.schedule
    return [Case(case.scenario, (*before, dataclasses.replace(last, variant=v))) for v in variants]


def in_shard(index: int, shard: tuple[int, int] | None) -> bool:
    """Round-robin over enumeration order: disjoint, complete, and balanced across scenarios."""
    if shard is None:
        return True
    k, n = shard
    return index % n == k - 1


def parse_shard(text: str) -> tuple[int, int]:
    k_text, sep, n_text = text.partition("/")
    if not sep or not k_text.isdigit() or not n_text.isdigit():
        raise ValueError(f"--shard {text!r}: expected K/N, e.g. 1/3")
    k, n = int(k_text), int(n_text)
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"--shard {text!r}: K must be between 1 and N (N >= 1)")
    return k, n
