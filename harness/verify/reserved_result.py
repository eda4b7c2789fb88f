"""reserved-result: a call's result is stored under the result id its tool_started reserved."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.calls import call_table_of
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Scenario

ID = InvariantId.RESERVED_RESULT


def check_reserved_result(obs: Observation, scenario: Scenario) -> list[Violation]:
    out: list[Violation] = []
    for site in call_table_of(Trace.of(obs)).sites:
        start = site.start
        if start is None or start.result_id is None:
            continue  # nothing was reserved (no intent, or an adapter that records no result id)
        for result in site.results:
            if result.msg_id == start.result_id:
                continue
            how = {"rerun": "recovery re-run ", "unknown": "unknown-outcome "}.get(
                result.recovered or "", "")
            out.append(Violation(ID, (
                f"the {how}result of {site.name} at commit {result.seq} was stored as "
                f"{result.msg_id}, but its tool_started (commit {start.seq}) reserved "
                f"{start.result_id}; a call's result must take the id its intent reserved"), {
                "call_id": site.call_id, "tool": site.tool, "result": result.msg_id,
                "result_seq": result.seq, "reserved": start.result_id, "start_seq": start.seq,
                "recovered": result.recovered}))
    return out
