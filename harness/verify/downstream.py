"""What a scenario's downstream services received, as the downstream invariants read it."""

from __future__ import annotations

from crashmatrix.harness.records.observation import DownstreamRequest, Observation
from crashmatrix.harness.verify.calls import CallSite, CallTable, contradicts
from crashmatrix.scenarios.model import Service

# A create the service took as a submission; `failed` too (a 5xx before it applied): the agent
# cannot tell it from a failure after, so what it sends next is a re-send all the same.
SUBMITTED = ("applied", "replayed", "conflict", "failed")
QUERIED = ("status", "not_found")  # answered on the status path (`no_route` is any other path)


def service_calls(table: CallTable, service: Service) -> list[CallSite]:
    """The calls of the service's tool that send to it: all of them, or, when one tool serves
    several services, those whose arguments do not give a field of the service's `where`
    another value."""
    assert service.tool is not None
    sites = table.of_tool(service.tool)
    # As for a record rule (at_most_once.charged): when every call contradicts `where` (a tool
    # that rewrites what it is given), the record cannot tell the calls apart: all are charged.
    return [s for s in sites if not contradicts(service.where, s)] or sites


def submissions(obs: Observation, service: Service) -> list[DownstreamRequest]:
    """The create requests the service took as submissions (applied, replayed, refused as a key
    conflict, or failed by an injected 5xx), in arrival order."""
    return [r for r in obs.downstream if r.service == service.name and r.outcome in SUBMITTED
            and r.method == service.create.method and r.path == service.create.path]


def creates(obs: Observation, service: Service) -> list[DownstreamRequest]:
    """Every request to the create endpoint the service answered, whatever it answered."""
    return [r for r in obs.downstream if r.service == service.name
            and r.method == service.create.method and r.path == service.create.path]


def queries(obs: Observation, service: Service) -> list[DownstreamRequest]:
    """The status queries the service answered (found or not), in arrival order."""
    return [r for r in obs.downstream if r.service == service.name and r.method == "GET"
            and r.outcome in QUERIED]


def shown(requests: list[DownstreamRequest]) -> str:
    """`#1 inc1 key A applied op_1, #2 inc2 key B applied op_2`, for messages: keys by letter, in
    order of first use (an agent's key may be random; the message stays the same across runs,
    the evidence keeps the keys themselves)."""
    letters: dict[str, str] = {}
    for r in requests:
        if r.key is not None and r.key not in letters:
            n = len(letters)
            letters[r.key] = chr(ord("A") + n % 26) + ("" if n < 26 else str(n // 26))
    return ", ".join(f"#{r.seq} inc{r.incarnation} key {letters[r.key] if r.key is not None else 'none'} "
                     f"{r.outcome}" + (f" {r.op}" if r.op else "") for r in requests)
