"""downstream-key: a re-sent operation carries the idempotency key of its first attempt."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.calls import call_table_of
from crashmatrix.harness.verify.downstream import service_calls, shown, submissions
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Scenario

ID = InvariantId.DOWNSTREAM_KEY


def check_downstream_key(obs: Observation, scenario: Scenario) -> list[Violation]:
    """A service that dedups by key saw more distinct keys (a submission without one counting as
    its own) than the calls of its tool: some attempt was re-sent under a key of its own, so the
    service could not recognise the repeat (a key made at send time, or from the attempt)."""
    table = call_table_of(Trace.of(obs))
    out: list[Violation] = []
    for service in scenario.services:
        if service.tool is None or service.dedup.where == "none":
            continue
        sent = submissions(obs, service)
        keys = {r.key if r.key is not None else f"<none #{r.seq}>" for r in sent}
        calls = service_calls(table, service)
        if len(keys) <= len(calls):
            continue
        missing = [r for r in sent if r.key is None]
        cause = (f"{len(missing)} submission(s) carried no key" if missing
                 else "the key changed between attempts")
        out.append(Violation(ID, (
            f"service {service.name} got {len(sent)} submissions under {len(keys)} keys ({shown(sent)}) "
            f"for {len(calls)} {service.tool} call(s): {cause}; a re-sent operation must carry the "
            f"key of its first attempt ({service.dedup})"), {
            "service": service.name, "keys": [r.key for r in sent],
            "incarnations": [r.incarnation for r in sent], "calls": [s.call_id for s in calls]}))
    return out
