"""status-before-resend: with no key to dedup by, an operation that may have applied is looked up
with the service's status query before it is submitted again."""

from __future__ import annotations

from itertools import pairwise

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.calls import call_table_of
from crashmatrix.harness.verify.downstream import queries, service_calls, shown, submissions
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Scenario

ID = InvariantId.STATUS_BEFORE_RESEND


def check_status_before_resend(obs: Observation, scenario: Scenario) -> list[Violation]:
    """More submissions than calls of the service's tool, one after another across a crash (a
    later incarnation's) or after an unknown outcome (no reply, a 5xx), with no status query
    between them: the agent re-sent blind, though the service offers to tell whether the first
    applied."""
    table = call_table_of(Trace.of(obs))
    out: list[Violation] = []
    for service in scenario.services:
        if service.tool is None or service.dedup.where != "none" or service.status is None:
            continue
        sent = submissions(obs, service)
        if len(sent) <= len(service_calls(table, service)):
            continue  # no re-send: as many submissions as operations the model asked for
        # A query whose answer the agent never got (lost, a 5xx) told it nothing.
        asked = [q.seq for q in queries(obs, service) if not q.unknown]
        for first, again in pairwise(sent):
            if first.incarnation == again.incarnation and not first.unknown:
                continue  # no crash between them, and the agent knew how the first one ended
            if any(first.seq < q < again.seq for q in asked):
                continue
            after = ("a crash" if first.incarnation != again.incarnation
                     else "an unknown outcome (no reply)" if first.status is None
                     else f"an unknown outcome (HTTP {first.status})")
            out.append(Violation(ID, (
                f"service {service.name} got a submission again after {after} with no status "
                f"query first ({shown([first, again])}); it has no key to dedup by, so whether "
                f"#{first.seq} applied must be asked ({service.status}) before sending again"), {
                "service": service.name, "first": first.seq, "again": again.seq,
                "incarnations": [first.incarnation, again.incarnation]}))
    return out
