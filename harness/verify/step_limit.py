"""retry-bound's step part: a run chain's model replies stop at max_steps, not one before or after."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.transcript import Message, Run, Transcript
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.off_by import off_by
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import BoundaryKind, Outcome, Role

ID = InvariantId.RETRY_BOUND
# A run ended for its step limit says so in its reason (agent/loop.py); another agent's words
# are not known, so only our wording is held to "not one early".
STEP_WORDS = "step limit"


def check_step_limit(obs: Observation, limit: int) -> list[Violation]:
    """From the store: each chain of resumed runs has at most `limit` model replies, makes no
    request after its `limit`-th, and is not ended for its step limit before it had them."""
    t = obs.transcript
    out: list[Violation] = []
    for chain in _chains(t):
        ids = {r.run_id for r in chain}
        replies = [m for m in t.messages if m.role == Role.ASSISTANT and m.run_id in ids]
        names = " → ".join(r.run_id for r in chain)
        last = chain[-1]
        if len(replies) > limit:
            extra = replies[limit]
            out.append(Violation(ID, (
                f"run chain {names} has {len(replies)} model replies, the {_nth(limit + 1)} "
                f"({extra.msg_id}) at commit {extra.seq}; max_steps {limit} ends a chain at its "
                f"{_nth(limit)} reply: the limit was reached {off_by(len(replies), limit)}"), {
                "runs": [r.run_id for r in chain], "replies": len(replies), "max_steps": limit,
                "over": extra.msg_id, "seq": extra.seq}))
        elif len(replies) == limit:
            out += _asked_after(obs, names, chain, replies[-1], limit)
        if (last.outcome == Outcome.FAILED and STEP_WORDS in (last.reason or "").lower()
                and len(replies) < limit):
            out.append(Violation(ID, (
                f"run {last.run_id} was ended for its step limit at commit {last.finished_seq} "
                f"after {len(replies)} model replies in its chain ({names}); max_steps {limit} "
                f"allows {limit}: the limit was reached {off_by(len(replies), limit)}"), {
                "run": last.run_id, "finished_seq": last.finished_seq, "replies": len(replies),
                "max_steps": limit}))
    return out


def _asked_after(obs: Observation, names: str, chain: list[Run], reply: Message,
                 limit: int) -> list[Violation]:
    """A request the chain made after its last allowed reply (one whose reply was never
    committed: the agent was killed first, or the chain asked and then failed)."""
    trace = Trace.of(obs)
    start = trace.commit_pos(reply.seq)
    finished = chain[-1].finished_seq
    end = trace.commit_pos(finished) if finished is not None else None
    if start is None:
        return []  # no commit probes (--black-box): nothing places the reply among the requests
    asked = [e for e in trace.of_kind(BoundaryKind.PROVIDER_BEFORE)
             if e.pos > start and (end is None or e.pos < end)]
    if not asked:
        return []
    return [Violation(ID, (
        f"run chain {names} asked the provider again ({', '.join(e.text for e in asked)}) after "
        f"its {_nth(limit)} model reply ({reply.msg_id}, commit {reply.seq}); max_steps {limit} "
        f"ends a chain there: the limit was reached {off_by(limit + 1, limit)}"), {
        "runs": [r.run_id for r in chain], "max_steps": limit, "reply": reply.msg_id,
        "events": [e.ref for e in asked]})]


def _chains(t: Transcript) -> list[list[Run]]:
    """The runs grouped by the run each resumed, from the first, in log order."""
    chains: dict[str, list[Run]] = {}
    root: dict[str, str] = {}
    for run in sorted(t.runs, key=lambda r: r.seq):
        first = root.get(run.resumed_from, run.run_id) if run.resumed_from else run.run_id
        root[run.run_id] = first
        chains.setdefault(first, []).append(run)
    return list(chains.values())


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
