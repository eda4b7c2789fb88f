"""How an incarnation is spawned for its crash step, and what its trace says once it has ended.

A plain step crashes at a probe event, in whatever process the runner's spawner makes. The others
need strace, in a fresh process: a black-box or system-call step names a store call strace kills
the agent entering (a system-call step's agent keeps its probes: its events are read as ever); an
injecting fault's step names a call strace makes fail (nothing is crashed at an event: the
incarnation runs to its end); an observing fault (a power loss) crashes at an event and reads what
the calls before it did; a recording traced for its store calls is killed nowhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crashmatrix.harness.adapters.interface import Adapter, LaunchSpec
from crashmatrix.harness.execution import blackbox, syscall_points
from crashmatrix.harness.execution.call_outcomes import after_injection, killed_at_call, killed_at_syscall
from crashmatrix.harness.execution.fs_inject import inject_args
from crashmatrix.harness.execution.fs_trace import parse_file
from crashmatrix.harness.execution.observed import ObservedKill, TracedSpawner, image_of
from crashmatrix.harness.execution.spawn import Spawner
from crashmatrix.harness.faults.interface import FaultKind, InjectingFault, injecting, observes_of
from crashmatrix.harness.records.case import CrashStep
from crashmatrix.harness.records.observation import IncarnationRecord
from crashmatrix.harness.records.tree_image import TreeImage

FaultOf = Callable[[str], FaultKind]


@dataclass
class Tracing:
    spawner: Spawner | None
    trace: Path  # strace's output, when it runs
    cover: tuple[Path, str] | None  # line coverage: never under strace
    step: CrashStep | None  # the probe event the runner still crashes at
    observing: bool  # the step's fault reads the calls made before its event
    before: TreeImage | None  # the session as the incarnation found it (an observing fault's)
    killing: CrashStep | None = None  # a store call strace kills the agent entering
    injected: CrashStep | None = None  # a store call strace makes fail
    inject: InjectingFault | None = None


def tracing_for(step: CrashStep | None, fault_of: FaultOf, spawner: Spawner | None, spec: LaunchSpec,
                trace: Path, cover: tuple[Path, str] | None, record: IncarnationRecord,
                record_calls: bool) -> Tracing:
    """How the incarnation `record` runs for `step`; sets `record.observed` when its fault will
    judge what the calls left (power, I/O errors: verdicts that depend on --fsync)."""
    fault = fault_of(step.fault) if step is not None else None
    observing = fault is not None and observes_of(fault)
    t = Tracing(spawner, trace, cover, step, observing, image_of(spec.session) if observing else None)
    inject = injecting(fault) if fault is not None else None
    if step is not None and step.at_call:
        # Killed by strace entering the call: a system-call step traced whole (the main thread,
        # every file), so an observing fault reads what it did; a black-box one on its store file.
        # A black-box kill is not `observed`: it keeps the page cache, whatever --fsync says.
        extra = (syscall_points.kill_args(step.kind, step.n) if step.syscall
                 else blackbox.kill_args(spec.session, step.kind, step.label, step.n))
        t.spawner = TracedSpawner(trace, extra, seccomp=False, follow=not step.syscall)
        t.cover, t.step, t.killing = None, None, step
        record.observed = observing and step.syscall
    elif record_calls:
        t.spawner, t.cover = TracedSpawner(trace), None
    elif inject is not None and step is not None:
        # strace matches -P against resolved paths (fds are shown by theirs): resolve it too.
        target = Path(os.path.realpath(spec.session / step.label))
        t.spawner = TracedSpawner(trace, inject_args(target, step.kind, inject.how, step.n))
        t.cover, t.step, t.injected, t.inject = None, None, step, inject
        record.observed = True
    elif observing:
        t.spawner, t.cover = TracedSpawner(trace), None
        record.observed = True
    return t


def killed_at_event(t: Tracing, fault: FaultKind, adapter: Adapter, fsync: bool, step: CrashStep,
                    record: IncarnationRecord, spec: LaunchSpec) -> None:
    """The incarnation was killed at its step's event (strace has exited too: its trace is
    whole): the fault acts, an observing one on what the calls before the kill did."""
    if t.observing and t.before is not None:
        observed = ObservedKill(adapter, spec, parse_file(t.trace), t.before, fsync, step.variant)
        fault.apply_observed(observed)
        observed.report(record)
    else:
        fault.apply(adapter, spec)


def read_trace(t: Tracing, fault_of: FaultOf, adapter: Adapter, fsync: bool, record: IncarnationRecord,
               spec: LaunchSpec, record_calls: bool, probes: bool, event_fd: int | None) -> None:
    """After the incarnation ended without a kill at a probe event (it ran to its end, or strace
    killed it entering its call; strace was waited for: its trace is whole): did the call its
    step named land, then the fault acts; or, traced for them, its store calls."""
    if t.inject is not None and t.injected is not None and t.before is not None:
        after_injection(t.inject, adapter, fsync, t.injected, record, spec, t.trace, t.before)
    elif t.killing is not None and t.killing.syscall:
        killed_at_syscall(fault_of(t.killing.fault), adapter, fsync, t.killing, record, spec, t.trace,
                          t.before)
    elif t.killing is not None:
        killed_at_call(fault_of(t.killing.fault), adapter, t.killing, record, spec, t.trace)
    elif record_calls and probes:
        # The agent's event writes mark which calls a probe event already stands before.
        record.store_calls = syscall_points.points(parse_file(t.trace), spec.session, event_fd,
                                                   [e.point for e in record.events])
    elif record_calls:
        record.store_calls = blackbox.store_points(parse_file(t.trace), spec.session)
