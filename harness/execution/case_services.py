"""A case's downstream services: registered with the fake downstream, counted, collected."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from crashmatrix.harness.records.observation import DownstreamRequest, IncarnationRecord
from crashmatrix.scenarios.model import Scenario, Service


class DownstreamHost(Protocol):
    """The fake downstream services as the runner uses them (fakes.FakeDownstream)."""

    def register(self, case_key: str, services: Sequence[Service]) -> dict[str, str]: ...

    def records(self, case_key: str) -> list[Any]: ...

    def forget(self, case_key: str) -> None: ...


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
                                     incarnation=inc))
    return out
