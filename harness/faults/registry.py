"""The fault kinds registered under the entry-point group `crashmatrix.faults`."""

from __future__ import annotations

from collections.abc import Iterable

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.faults.interface import FaultKind
from crashmatrix.harness.plugins import FAULTS_GROUP, ExtensionPoint, UnknownPlugin
from crashmatrix.harness.records.case import Case, CaseIdError

FAULTS: ExtensionPoint[FaultKind] = ExtensionPoint(FAULTS_GROUP, "fault")


def faults_for(adapter: Adapter) -> list[FaultKind]:
    """Every registered fault kind the adapter supports, in a stable (name) order."""
    return [f for f in FAULTS.all() if f.requires <= adapter.capabilities]


def check_faults(case: Case, adapter: Adapter, known: Iterable[FaultKind] | None = None) -> None:
    """Raise CaseIdError naming the first step whose fault is not registered (among `known`,
    default: the registry), or needs a capability the adapter does not declare."""
    by_name = {f.name: f for f in (FAULTS.all() if known is None else known)}
    for step in case.schedule:
        fault = by_name.get(step.fault)
        if fault is None:
            raise CaseIdError(f"bad crash step {step.token()!r}: unknown fault {step.fault!r} "
                              f"(known: {', '.join(sorted(by_name))})")
        lacking = sorted(c.value for c in fault.requires - adapter.capabilities)
        if lacking:
            raise CaseIdError(f"crash step {step.token()!r}: fault {fault.name!r} needs "
                              f"{', '.join(lacking)}, which agent {adapter.name!r} does not declare")


def fault_named(name: str) -> FaultKind:
    try:
        return FAULTS.get(name)
    except UnknownPlugin as exc:
        raise CaseIdError(str(exc)) from None
