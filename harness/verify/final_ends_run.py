"""final-ends-run: no provider request follows a committed final answer in its run chain."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crashmatrix.harness.records.observation import Observation, Request
from crashmatrix.harness.records.transcript import Message, Run, Transcript
from crashmatrix.harness.records.violation import InvariantId, Violation, short
from crashmatrix.harness.verify.trace import Located, Pos, Trace
from crashmatrix.scenarios.model import BoundaryKind, Role, Scenario

ID = InvariantId.FINAL_ENDS_RUN
SYSTEM = "system"


def check_final_ends_run(obs: Observation, scenario: Scenario) -> list[Violation]:
    # With the store, each request is placed after the final answer's commit and in the run it
    # was made for; the provider's log alone still shows a history that goes on past an answer.
    found = _asked_after_landing(obs) if obs.store_read else []
    return found or _asked_past_answer(obs.requests)


def _asked_after_landing(obs: Observation) -> list[Violation]:
    """From the store and the trace: after a final answer landed, no request in its run chain."""
    t = obs.transcript
    trace = Trace.of(obs)
    starts = _run_starts(t, trace)
    asked = trace.of_kind(BoundaryKind.PROVIDER_BEFORE)
    out: list[Violation] = []
    for m in t.messages:
        if m.role != Role.ASSISTANT or m.calls:
            continue
        landed = trace.commit_pos(m.seq)
        if landed is None:
            continue  # the trace never saw it land: nothing to place requests against
        chain = _chain(t, m.run_id)
        after = [(e, run) for e in asked if e.pos > landed
                 for run in [_run_at(starts, e.pos)] if run is not None and run.run_id in chain]
        if after:
            out.append(_violation(m, landed, after, trace))
    return out


def _violation(m: Message, landed: Pos, after: list[tuple[Located, Run]], trace: Trace) -> Violation:
    e, run = after[0]
    where = (f"in run {run.run_id}, which resumes run {m.run_id}" if run.run_id != m.run_id
             else f"in run {m.run_id}")
    more = f" ({len(after) - 1} more request(s) after it)" if len(after) > 1 else ""
    at = f"inc{landed[0]}#{landed[1]}"
    return Violation(ID, (
        f"{e.text} asked the model again after the final answer {m.msg_id} of run {m.run_id} "
        f"({short(m.content, 40)!r}, commit {m.seq}, landed at {at}), {where}{more}; a committed "
        "final answer ends its run chain"), {
        "message": m.msg_id, "seq": m.seq, "run": m.run_id, "landed": at,
        "events": [x.ref for x, _ in after], "runs": sorted({r.run_id for _, r in after})})


def _run_starts(t: Transcript, trace: Trace) -> list[tuple[Pos, Run]]:
    """Where each run's start landed: its commit probe, else the start of the incarnation that
    wrote it (as measured by the harness), in order."""
    out: list[tuple[Pos, Run]] = []
    for run in t.runs:
        pos = trace.commit_pos(run.seq)
        if pos is None:
            owner = trace.owner(run.seq)
            if owner is None:
                continue
            pos = (owner, 0)
        out.append((pos, run))
    return sorted(out, key=lambda x: x[0])


def _run_at(starts: list[tuple[Pos, Run]], pos: Pos) -> Run | None:
    """The run a request at `pos` was made for: the latest one started before it."""
    current = None
    for start, run in starts:
        if start >= pos:
            break
        current = run
    return current


def _chain(t: Transcript, run_id: str) -> set[str]:
    """The run and every run that resumes it, directly or through others."""
    chain = {run_id}
    grew = True
    while grew:
        grew = False
        for r in t.runs:
            if r.resumed_from in chain and r.run_id not in chain:
                chain.add(r.run_id)
                grew = True
    return chain


def _asked_past_answer(requests: list[Request]) -> list[Violation]:
    """From the provider's log: no request's history goes on past a final answer (an assistant
    message without tool calls) with no user message after it."""
    found: list[tuple[Request, int, Any]] = []
    for r in requests:
        body = _body(r.messages)
        k = open_final_answer(body)
        if k is not None:
            found.append((r, k, body[k]))
    if not found:
        return []
    r, k, answer = found[0]
    more = f" ({len(found) - 1} more request(s) like it)" if len(found) > 1 else ""
    return [Violation(ID, (
        f"request #{r.index} asked the model again after its final answer (message index {k}, after "
        f"the system message: {short(answer.get('content'), 40)!r}) with no new user message{more}; "
        "a final answer ends its run chain"), {
        "request": r.index, "position": k, "requests": [x.index for x, _, _ in found]})]


def _body(messages: list[dict[str, Any]]) -> list[Any]:
    if messages and isinstance(messages[0], dict) and messages[0].get("role") == SYSTEM:
        return list(messages[1:])
    return list(messages)


def open_final_answer(body: Sequence[Any]) -> int | None:
    """The index of a final answer that no later user message follows, if any: a history no
    correct agent asks the model about (scenario_error uses the same rule for its tripwire)."""
    for k in range(len(body) - 1, -1, -1):
        m = body[k]
        if not isinstance(m, dict):
            continue
        if m.get("role") == Role.USER:
            return None
        if m.get("role") == Role.ASSISTANT and not m.get("tool_calls"):
            return k
    return None
