"""pairing: every tool call has exactly one result right after its assistant message, no orphans."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.calls import call_table_of
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Role, Scenario

ID = InvariantId.PAIRING


def check_pairing(obs: Observation, scenario: Scenario) -> list[Violation]:
    out = _stored_pairs(obs) if obs.store_read else []
    for r in obs.requests:
        # Only the API's own refusal is about pairing; the fake's script-gap 400 means the
        # history left the script, which the scenario oracle judges by the run's outcome. The
        # fake says which refusals were for pairing; on the chat wire any invalid request
        # counts, as it always has (its shape errors are broken histories too), while the other
        # wires refuse for reasons of their own (an unknown previous_response_id, say).
        refused = r.pairing or (r.wire == "chat" and r.error_type in (None, "invalid_request_error"))
        if r.status == 400 and refused:
            out.append(Violation(
                ID, f"provider request #{r.index} was refused with HTTP 400: the history sent broke "
                "the API's pairing rule (a call without its result, or an orphan result)",
                {"request": r.index, "status": r.status, "messages": len(r.messages)}))
    return out


def _stored_pairs(obs: Observation) -> list[Violation]:
    """Every stored call has exactly one stored result right after it, and no result is orphan."""
    trace = Trace.of(obs)
    table = call_table_of(trace)
    # The assistant message of the last window: tool messages only follow it.
    tail = max((m.seq for m in obs.transcript.messages if m.role != Role.TOOL), default=0)
    out: list[Violation] = []
    for site in table.sites:
        where = f"assistant message {site.assistant.msg_id} (commit {site.assistant.seq})"
        evidence = {"call_id": site.call_id, "tool": site.tool, "assistant": site.assistant.msg_id,
                    "assistant_seq": site.assistant.seq, "result_seqs": [r.seq for r in site.results]}
        if not site.results:
            # A crash state is not an end state: the last call may still be owed if the case
            # ended with a kill. Anything else is a call the model would see unanswered.
            if trace.ended_killed and site.assistant.seq == tail:
                continue
            out.append(Violation(ID, f"{site.name} of {where} has no result among the tool "
                                     "messages right after it", evidence))
        elif len(site.results) > 1:
            seqs = ", ".join(str(r.seq) for r in site.results)
            out.append(Violation(ID, f"{site.name} of {where} has {len(site.results)} results "
                                     f"(commits {seqs}); it must have exactly one", evidence))
    for m in table.orphans:
        out.append(Violation(
            ID, f"tool result {m.msg_id} for call {m.call_id} at commit {m.seq} answers no call of "
            "the assistant message right before it (orphan result)",
            {"message": m.msg_id, "call_id": m.call_id, "seq": m.seq}))
    return out
