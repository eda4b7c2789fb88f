"""downstream-backed: a result reported to the model as a success is backed by an operation the
downstream service applied (its own record, not the agent's word)."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.calls import call_table_of
from crashmatrix.harness.verify.downstream import creates, service_calls
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Scenario

ID = InvariantId.DOWNSTREAM_BACKED
ERROR_PREFIX = "ERROR: "


def check_downstream_backed(obs: Observation, scenario: Scenario) -> list[Violation]:
    """More successful results of the service's tool than create requests the service answered
    at all (applied, replayed, or refused: a tool may report a refusal in plain text the verifier
    cannot read as an error): some success was made up without a request, typically after a
    crash. A result the service refused but the agent called a success is not caught here."""
    table = call_table_of(Trace.of(obs))
    marker = scenario.provider.unknown_marker
    out: list[Violation] = []
    for service in scenario.services:
        if service.tool is None:
            continue
        ok = [(s, r) for s in service_calls(table, service) for r in s.results
              if not r.is_error and not (r.content or "").startswith(ERROR_PREFIX)
              and marker not in (r.content or "")]
        answered = creates(obs, service)
        ops = {r.op for r in answered if r.outcome in ("applied", "replayed") and r.op}
        if len(ok) <= len(answered):
            continue
        out.append(Violation(ID, (
            f"{service.tool} reported success to the model {len(ok)} time(s) "
            f"({', '.join(f'{s.call_id} at commit {r.seq}' for s, r in ok)}), but service "
            f"{service.name} answered {len(answered)} request(s) to create and applied "
            f"{len(ops)} operation(s) ({', '.join(sorted(ops)) or 'none'}); a success must be "
            "backed by an operation the service applied"), {
            "service": service.name, "results": [r.seq for _, r in ok], "ops": sorted(ops),
            "requests": [r.seq for r in answered]}))
    return out
