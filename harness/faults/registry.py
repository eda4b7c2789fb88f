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


def check_faults(case: Case, known: Iterable[FaultKind]) -> None:
    """Raise CaseIdError naming the first step whose fault is not among `known`."""
    names = {f.name for f in known}
    for step in case.schedule:
        if step.fault not in names:
            raise CaseIdError(f"bad crash step {step.token()!r}: unknown fault {step.fault!r} "
                              f"(known: {', '.join(sorted(names))})")


def fault_named(name: str) -> FaultKind:
    try:
        return FAULTS.get(name)
    except UnknownPlugin as exc:
        raise CaseIdError(str(exc)) from None
