"""queued-input: a delivered input is taken in exactly once and used once; a cancel closes its run."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Delivery, Observation
from crashmatrix.harness.records.transcript import Record, Run, Transcript
from crashmatrix.harness.records.violation import InvariantId, Violation, short
from crashmatrix.harness.verify.trace import Pos, Trace
from crashmatrix.scenarios.model import BoundaryKind, Outcome, Role, Scenario

ID = InvariantId.QUEUED_INPUT
INPUT, CANCEL = "input", "cancel"


def check_queued_input(obs: Observation, scenario: Scenario) -> list[Violation]:
    t = obs.transcript
    trace = Trace.of(obs)
    last = max(t.runs, key=lambda r: r.seq) if t.runs else None
    # Only an end state can be judged for what is still missing; a crash state may lack anything.
    completed = last is not None and last.outcome == Outcome.COMPLETED and not trace.ended_killed
    out: list[Violation] = []
    delivered = {d.item_id for d in obs.deliveries if d.kind == INPUT}
    for d in obs.deliveries:
        if d.kind == INPUT:
            out += _input(t, d, completed)
        elif d.kind == CANCEL and not trace.ended_killed:
            out += _cancel(t, trace, d)
    for r in t.of_kind("input_queued"):
        if str(r.data.get("input_id")) not in delivered:
            out.append(Violation(ID, (
                f"input_queued {r.data.get('input_id')} at commit {r.seq} matches no input the harness "
                "delivered"), {"input_id": r.data.get("input_id"), "seq": r.seq}))
    return out


def _of(records: list[Record], item_id: str) -> list[Record]:
    return [r for r in records if str(r.data.get("input_id")) == item_id]


def _input(t: Transcript, d: Delivery, completed: bool) -> list[Violation]:
    queued = _of(t.of_kind("input_queued"), d.item_id)
    consumed = _of(t.of_kind("input_consumed"), d.item_id)
    name = f"input {d.item_id} (delivered at inc{d.incarnation}#{d.event_n})"
    ev = {"input_id": d.item_id, "delivered_at": f"inc{d.incarnation}#{d.event_n}",
          "queued_seqs": [r.seq for r in queued], "consumed_seqs": [r.seq for r in consumed]}
    out: list[Violation] = []
    if len(queued) > 1:
        out.append(Violation(ID, f"{name} was queued {len(queued)} times (commits "
                                 f"{', '.join(str(r.seq) for r in queued)}); it must be queued once", ev))
    for r in queued:
        if r.data.get("text") != d.text:
            out.append(Violation(ID, (
                f"{name} was queued at commit {r.seq} with text {short(r.data.get('text'), 40)!r}, "
                f"but the text delivered was {short(d.text, 40)!r}"), ev))
    if len(consumed) > 1:
        out.append(Violation(ID, f"{name} was consumed {len(consumed)} times (commits "
                                 f"{', '.join(str(r.seq) for r in consumed)}); at most once", ev))
    if consumed and not queued:
        out.append(Violation(ID, f"{name} was consumed at commit {consumed[0].seq} but never queued", ev))
    messages = {m.msg_id: m for m in t.messages}
    for r in consumed:
        m = messages.get(str(r.data.get("message_id")))
        if m is None or m.role != Role.USER or m.content != d.text:
            got = "no message" if m is None else f"a {m.role} message {short(m.content, 40)!r}"
            out.append(Violation(ID, (
                f"{name} was consumed at commit {r.seq} as message {r.data.get('message_id')}, which is "
                f"{got}, not a user message with the delivered text"), ev))
    if completed and not consumed:
        what = "never queued" if not queued else "queued but never consumed"
        out.append(Violation(ID, f"{name} was {what}, yet the session's last run completed", ev))
    return out


def _cancel(t: Transcript, trace: Trace, d: Delivery) -> list[Violation]:
    at: Pos = (d.incarnation, d.event_n)
    run = _open_at(t, trace, at)
    if run is None:
        return []
    # The agent sees a cancel at its next inbox poll, or when the next incarnation starts; a run
    # that finished before that could not have honoured it.
    polls = [e.pos for e in trace.of_kind(BoundaryKind.INBOX_POLL, d.incarnation) if e.pos > at]
    seen_by: Pos = polls[0] if polls else (d.incarnation + 1, 0)
    name = f"cancel {d.item_id} (delivered at inc{d.incarnation}#{d.event_n} while run {run.run_id} was open)"
    chain = [run]
    while True:
        current = chain[-1]
        successor = next((r for r in t.runs if r.resumed_from == current.run_id), None)
        if current.outcome == Outcome.CANCELLED:
            if successor is not None:
                return [Violation(ID, (
                    f"{name} closed run {current.run_id} cancelled, but run {successor.run_id} resumed "
                    "it afterwards"), {"cancel_id": d.item_id, "runs": [r.run_id for r in chain],
                                       "resumed_by": successor.run_id})]
            closed = trace.commit_pos(current.finished_seq) if current.finished_seq is not None else None
            return _started_after_seen(trace, d, name, seen_by, closed) if polls else []
        if successor is None or successor in chain:
            break
        chain.append(successor)
    end = chain[-1]
    finished = trace.commit_pos(end.finished_seq) if end.finished_seq is not None else None
    if end.outcome is not None and finished is not None and finished < seen_by:
        return []
    ended = f"ended {end.outcome}" if end.outcome else "was never closed"
    return [Violation(ID, (
        f"{name} did not close it: run {end.run_id} {ended}; a cancel must close the open run "
        "cancelled"), {"cancel_id": d.item_id, "runs": [r.run_id for r in chain],
                       "outcome": end.outcome, "finished_seq": end.finished_seq})]


def _started_after_seen(trace: Trace, d: Delivery, name: str, seen_by: Pos,
                        closed: Pos | None) -> list[Violation]:
    """A tool begun after the poll that could see the cancel (the item was in the inbox), before
    the run closed: the agent acted past it. Judged within the poll's incarnation: a recovery that
    finds a cancel at its start may still repair the call it interrupted. An effect.before the
    harness killed the agent at never began (`Trace.effects`)."""
    late = [e for e in trace.effects() if e.kind == BoundaryKind.EFFECT_BEFORE.value
            and e.inc == seen_by[0] and e.pos > seen_by and (closed is None or e.pos < closed)]
    if not late:
        return []
    return [Violation(ID, (
        f"{name}: tool {late[0].label} began at inc{late[0].inc}#{late[0].event.n}, after the inbox "
        f"poll at inc{seen_by[0]}#{seen_by[1]} that could see the cancel; no tool may begin once a "
        "cancel can be seen"), {"cancel_id": d.item_id, "seen_at": f"inc{seen_by[0]}#{seen_by[1]}",
                            "began": [e.ref for e in late]})]


def _open_at(t: Transcript, trace: Trace, at: Pos) -> Run | None:
    for run in t.runs:
        started = trace.commit_pos(run.seq)
        if started is None or started > at:
            continue
        finished = trace.commit_pos(run.finished_seq) if run.finished_seq is not None else None
        if run.outcome is None or (finished is not None and finished > at):
            return run
    return None
