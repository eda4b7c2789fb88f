"""After an incarnation strace killed at a call, or whose call it made fail: did it land; then the fault acts.

A black-box or system-call step is a promise the recording made (the n-th such call is made,
on that file); an injected step, that the call to fail comes. A run that breaks the promise
proves nothing about the case: it is marked nondeterministic, and the fault does not act.
"""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.adapters.interface import Adapter, LaunchSpec
from crashmatrix.harness.execution import blackbox, syscall_points
from crashmatrix.harness.execution.fs_inject import injected
from crashmatrix.harness.execution.fs_trace import parse_file
from crashmatrix.harness.execution.observed import ObservedKill
from crashmatrix.harness.faults.interface import FaultKind, InjectingFault, observes_of
from crashmatrix.harness.records.case import CrashStep
from crashmatrix.harness.records.observation import IncarnationRecord
from crashmatrix.harness.records.tree_image import TreeImage


def killed_at_call(fault: FaultKind, adapter: Adapter, step: CrashStep, record: IncarnationRecord,
                   spec: LaunchSpec, trace: Path) -> None:
    """After a black-box step's incarnation ended: check strace killed it entering the call
    (else the case proves nothing), then let the fault act as after any kill."""
    if not blackbox.landed(parse_file(trace), spec.session, step.kind, step.label, step.n):
        record.nondeterministic = (
            f"incarnation {record.index} was not killed entering call {step.n} of {step.kind} on "
            f"{step.label} (exit code {record.exit_code}): the recording promised it")
        return
    record.killed_at_call = f"{step.kind} {step.n} of {step.label}"
    fault.apply(adapter, spec)


def killed_at_syscall(fault: FaultKind, adapter: Adapter, fsync: bool, step: CrashStep,
                      record: IncarnationRecord, spec: LaunchSpec, trace: Path,
                      before: TreeImage | None) -> None:
    """After a system-call step's incarnation ended: check strace killed it entering the
    call the step names, then let the fault act: a kill as after any kill, an observing one
    (`power`) on the whole trace of the main thread and the image taken before it."""
    calls = parse_file(trace)
    missed = syscall_points.landed(calls, spec.session, step.kind, step.label, step.n, step.ordinal)
    if missed is not None:
        record.nondeterministic = (
            f"incarnation {record.index} was not killed entering {step.kind} call {step.n} on "
            f"{step.label}, as the recording promised: {missed} (exit code {record.exit_code})")
        return
    record.killed_at_call = f"{step.kind} {step.n} (on {step.label})"
    if before is not None and observes_of(fault):
        # The call it was killed entering never ran: not a write the power took half of.
        killed = [c for c in calls if c.syscall.value == step.kind][step.n - 1]
        ran = [c for c in calls if c is not killed]
        observed = ObservedKill(adapter, spec, ran, before, fsync, step.variant)
        fault.apply_observed(observed)
        observed.report(record)
    else:
        fault.apply(adapter, spec)


def after_injection(fault: InjectingFault, adapter: Adapter, fsync: bool, step: CrashStep,
                    record: IncarnationRecord, spec: LaunchSpec, trace: Path, before: TreeImage) -> None:
    """After an injected incarnation ended: check its call came (else the case proves nothing),
    then let the fault act on what it left."""
    with trace.open(encoding="utf-8", errors="surrogateescape") as f:
        came = injected(f)
    if not came:
        record.nondeterministic = (
            f"incarnation {record.index} never made call {step.n} of {step.kind} on {step.label} "
            f"that {fault.name} was to fail (the recording promised it)")
        return
    record.injected = f"{step.kind} {step.n} of {step.label}: {fault.how}"
    record.must_stop = fault.must_stop
    observed = ObservedKill(adapter, spec, parse_file(trace), before, fsync, step.variant)
    fault.apply_observed(observed)
    observed.report(record)
