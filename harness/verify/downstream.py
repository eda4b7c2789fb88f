"""What a scenario's downstream services received, as the downstream invariants read it."""

from __future__ import annotations

from crashmatrix.harness.records.observation import DownstreamRequest, Observation
from crashmatrix.scenarios.model import Service

SUBMITTED = ("applied", "replayed", "conflict")  # a create the service took as a submission
QUERIED = ("status", "not_found")


def submissions(obs: Observation, service: Service) -> list[DownstreamRequest]:
    """The create requests the service took as submissions (applied, replayed or refused as a
    key conflict), in arrival order."""
    return [r for r in obs.downstream if r.service == service.name and r.outcome in SUBMITTED
            and r.method == service.create.method and r.path == service.create.path]


def queries(obs: Observation, service: Service) -> list[DownstreamRequest]:
    """The status queries the service answered (found or not), in arrival order."""
    return [r for r in obs.downstream if r.service == service.name and r.method == "GET"
            and r.outcome in QUERIED]


def shown(requests: list[DownstreamRequest]) -> str:
    """`#1 inc1 key k1 applied op_1, #2 inc2 key k2 applied op_2`, for messages."""
    return ", ".join(f"#{r.seq} inc{r.incarnation} key {r.key or 'none'} {r.outcome}"
                     + (f" {r.op}" if r.op else "") for r in requests)
