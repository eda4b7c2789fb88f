"""A case's downstream services: registered with the fake downstream, armed, counted, collected."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from crashmatrix.fakes.downstream import Fate, Injection
from crashmatrix.harness.faults.interface import AtRequestFault, FaultKind
from crashmatrix.harness.records.case import CrashStep
from crashmatrix.harness.records.observation import DownstreamRequest, IncarnationRecord
from crashmatrix.scenarios.model import Scenario, Service


class DownstreamHost(Protocol):
    """The fake downstream services as the runner uses them (fakes.FakeDownstream)."""

    def register(self, case_key: str, services: Sequence[Service]) -> dict[str, str]: ...

    def records(self, case_key: str) -> list[Any]: ...

    def forget(self, case_key: str) -> None: ...

    def arm(self, case_key: str, seq: int, injection: Injection,
            kill: Callable[[], None] | None = None) -> None: ...

    def disarm(self, case_key: str) -> Any: ...


class Killable(Protocol):
    def signal_kill(self) -> None: ...


def register(host: DownstreamHost | None, case_key: str, scenario: Scenario) -> dict[str, str]:
    """The case's services, registered: environment variable -> base URL ({} for none)."""
    if not scenario.services:
        return {}
    assert host is not None  # the runner refuses such a case without a host (_check_supported)
    urls = host.register(case_key, scenario.services)
    return {env: urls[s.name] for s in scenario.services for env in s.envs}


def count(host: DownstreamHost | None, case_key: str, services: Mapping[str, str]) -> int:
    """How many requests the case's services have recorded so far."""
    return len(host.records(case_key)) if services and host is not None else 0


def step_problems(step: CrashStep, fault: FaultKind, scenario: Scenario) -> list[str]:
    """Why a downstream step cannot be run on this scenario ([] when it can): a step the matrix
    never enumerates there would only run the case to a nondeterministic end."""
    names = [s.name for s in scenario.services]
    if not names:
        return [f"step {step.token()} acts at a downstream request, and scenario "
                f"{scenario.name!r} declares no downstream services"]
    if step.label not in names:
        return [f"step {step.token()} names service {step.label!r}; scenario {scenario.name!r} "
                f"declares {', '.join(names)}"]
    if step.n < 1 or not fault.enumerated_at(step.kind, step.label):
        return [f"step {step.token()}: fault {fault.name!r} acts at no request {step.n} of kind "
                f"{step.kind!r} (requests count from 1; kinds: create, status)"]
    return []


def injection_of(fault: AtRequestFault) -> Injection:
    """What the fake downstream does at the request a DOWNSTREAM fault kind is armed at."""
    return Injection(fault.name, fault.applies, Fate(fault.fate.value), fault.status)


def describe(record: Any) -> str:
    """`reply-lost at downstream request 2 (POST /messages on mail: applied op_1)`."""
    did = record.outcome if record.op is None else f"{record.outcome} {record.op}"
    return (f"{record.fault} at downstream request {record.seq} ({record.method} {record.path} "
            f"on {record.service}: {did})")


def collect(host: DownstreamHost | None, case_key: str, services: Mapping[str, str],
            incarnations: list[IncarnationRecord]) -> list[DownstreamRequest]:
    """What the downstream recorded, each request given the incarnation that was running when it
    arrived; the case is then forgotten by the downstream."""
    if not services or host is None:
        return []
    raw = host.records(case_key)
    host.forget(case_key)
    out = []
    for r in raw:
        # The last incarnation started before the request arrived sent it.
        inc = next((i.index for i in reversed(incarnations) if i.downstream_before < r.seq), None)
        out.append(DownstreamRequest(seq=r.seq, service=r.service, method=r.method, path=r.path,
                                     key=r.key, outcome=str(r.outcome), status=r.status, op=r.op,
                                     incarnation=inc, kind=r.kind, fault=r.fault))
    return out


class ArmedRequest:
    """A downstream step (`d02:create:mail/reply-lost`) armed for one incarnation: the fake
    downstream injects the fault at the incarnation's `step.n`-th downstream request; a KILL fate
    SIGKILLs the incarnation from the downstream's thread, before the reply is sent."""

    def __init__(self, host: DownstreamHost | None, case_key: str, record: IncarnationRecord,
                 step: CrashStep, injection: Injection) -> None:
        if host is None:
            raise ValueError("a downstream step needs a fake downstream")  # _check_supported
        self._host, self._key, self._step, self._injection = host, case_key, step, injection
        self._lock = threading.Lock()
        self._target: Killable | None = None
        self._due = False  # the kill came before the incarnation was attached
        host.arm(case_key, record.downstream_before + step.n, injection, self._kill)

    def attach(self, target: Killable) -> None:
        """The incarnation started: a kill due already lands now."""
        with self._lock:
            self._target = target
            due = self._due
        if due:
            target.signal_kill()

    def _kill(self) -> None:
        with self._lock:
            target = self._target
            self._due = target is None
        if target is not None:
            target.signal_kill()

    def settle(self, record: IncarnationRecord) -> None:
        """Once the incarnation ended: disarm, and record what the fault did (or that the
        incarnation never made the request the recording promised: then it proves nothing)."""
        fired = self._host.disarm(self._key)
        step = self._step
        if fired is None:
            made = len(self._host.records(self._key)) - record.downstream_before
            record.nondeterministic = (
                f"incarnation {record.index} made {made} downstream request(s), the recording "
                f"promised request {step.n} ({step.point})")
            return
        if f"{fired.kind}:{fired.service}" != step.point:
            record.nondeterministic = (
                f"incarnation {record.index} downstream request {step.n} was {fired.kind}:"
                f"{fired.service}, the recording listed {step.point}")
        record.downstream_fault = describe(fired)
        if self._injection.fate is Fate.KILL:
            record.killed_at_request = record.downstream_fault
