"""The fault kinds registered under the entry-point group `crashmatrix.faults`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.faults.interface import (
    FaultKind,
    at_request,
    at_store_calls_of,
    at_syscall_points_of,
    by_default_of,
    has_variants_of,
    observes_of,
)
from crashmatrix.harness.plugins import FAULTS_GROUP, ExtensionPoint, UnknownPlugin
from crashmatrix.harness.records.case import Case, CaseIdError

FAULTS: ExtensionPoint[FaultKind] = ExtensionPoint(FAULTS_GROUP, "fault")


def faults_for(adapter: Adapter, selected: Sequence[str] | None = None) -> list[FaultKind]:
    """The fault kinds a matrix enumerates, in a stable (name) order: those named in `selected`
    (`--fault`; check them first with `check_selection`), else every registered kind that is in
    the default set; either way only those the adapter supports."""
    chosen = FAULTS.all() if selected is None else [f for f in FAULTS.all() if f.name in selected]
    return [f for f in chosen if f.requires <= adapter.capabilities
            and (selected is not None or by_default_of(f))]


def check_selection(selected: Sequence[str], adapter: Adapter) -> list[str]:
    """What is wrong with `--fault` names for this agent: an unknown fault, or one it cannot take."""
    by_name = {f.name: f for f in FAULTS.all()}
    problems = []
    for name in selected:
        fault = by_name.get(name)
        if fault is None:
            problems.append(f"--fault {name}: unknown fault (known: {', '.join(sorted(by_name))})")
            continue
        lacking = sorted(c.value for c in fault.requires - adapter.capabilities)
        if lacking:
            problems.append(f"--fault {name}: needs {', '.join(lacking)}, which agent {adapter.name!r} "
                            "does not declare")
    return problems


def observing(faults: Iterable[FaultKind]) -> bool:
    """Whether any of them observes file-system calls (and so needs strace)."""
    return any(observes_of(f) for f in faults)


def check_faults(case: Case, adapter: Adapter, known: Iterable[FaultKind] | None = None) -> None:
    """Raise CaseIdError naming the first step whose fault is not registered (among `known`,
    default: the registry), or needs a capability the adapter does not declare."""
    by_name = {f.name: f for f in (FAULTS.all() if known is None else known)}
    for step in case.schedule:
        fault = by_name.get(step.fault)
        if fault is None:
            raise CaseIdError(f"bad crash step {step.token()!r}: unknown fault {step.fault!r} "
                              f"(known: {', '.join(sorted(by_name))})")
        if step.downstream != (at_request(fault) is not None):
            where = "a downstream request (dNN:kind:service)" if at_request(fault) else "a probe event"
            raise CaseIdError(f"bad crash step {step.token()!r}: fault {fault.name!r} acts at {where}")
        if step.syscall and not at_syscall_points_of(fault):
            raise CaseIdError(f"bad crash step {step.token()!r}: fault {fault.name!r} does not act at a "
                              "system call (sNN and fNN steps take: a kill, a power loss)")
        if step.blackbox and not at_store_calls_of(fault):
            raise CaseIdError(f"bad crash step {step.token()!r}: fault {fault.name!r} does not act at a "
                              "black-box store call (bNN steps take: kill)")
        if step.variant is not None and not has_variants_of(fault):
            raise CaseIdError(f"bad crash step {step.token()!r}: fault {fault.name!r} has no variants "
                              f"(drop ':{step.variant}')")
        lacking = sorted(c.value for c in fault.requires - adapter.capabilities)
        if lacking:
            raise CaseIdError(f"crash step {step.token()!r}: fault {fault.name!r} needs "
                              f"{', '.join(lacking)}, which agent {adapter.name!r} does not declare")


def fault_named(name: str) -> FaultKind:
    try:
        return FAULTS.get(name)
    except UnknownPlugin as exc:
        raise CaseIdError(str(exc)) from None
