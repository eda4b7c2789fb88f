"""retry-intent: a failed request is recorded (retry_pending) before any retry, and is owed after a crash."""

from __future__ import annotations

from crashmatrix.harness.records.observation import IncarnationRecord, Observation
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.trace import Located, Trace
from crashmatrix.scenarios.model import BoundaryKind, Outcome, Scenario

ID = InvariantId.RETRY_INTENT
K = BoundaryKind
ERROR_LABEL = "error"
OK_STATUS = 200


def check_retry_intent(obs: Observation, scenario: Scenario) -> list[Violation]:
    t = obs.transcript
    trace = Trace.of(obs)
    # Commits that record what happens after a failed request: the intent to retry, or giving up.
    intent = {r.seq for r in t.of_kind("retry_pending")}
    intent |= {r.finished_seq for r in t.runs if r.outcome == Outcome.FAILED and r.finished_seq}
    out: list[Violation] = []
    for inc in obs.incarnations:
        found = _unrecorded_errors(trace, inc, intent)
        out += found or _uncounted_faults(trace, inc, intent)
        out += _owed_retry(t, trace, inc)
    return out


def _unrecorded_errors(trace: Trace, inc: IncarnationRecord, intent: set[int]) -> list[Violation]:
    """From the trace: between an error and the next request, a retry_pending must be committed."""
    if not any(e.label == ERROR_LABEL for e in trace.of_kind(K.PROVIDER_AFTER, inc.index)):
        return []  # no failed request: most incarnations, found without walking their events
    events = [e for e in trace.events if e.inc == inc.index]
    out: list[Violation] = []
    for k, e in enumerate(events):
        if e.kind != K.PROVIDER_AFTER or e.label != ERROR_LABEL:
            continue
        rest = events[k + 1 :]
        following: Located | None = next((x for x in rest if x.kind == K.PROVIDER_BEFORE), None)
        window = rest[: rest.index(following)] if following is not None else rest
        if any(x.kind in (K.COMMIT_WRITTEN, K.COMMIT_AFTER) and x.seq in intent for x in window):
            continue
        if following is None and inc.interrupted:
            continue  # killed (or its commit failed) before it could record it: recovery owes the retry
        then = (f"was followed by {following.text}" if following is not None
                else f"inc{inc.index} ended")
        out.append(Violation(ID, (
            f"{e.text} {then} without a committed retry_pending or run_finished(failed); the intent "
            "to retry must be durable before waiting"), {
            "incarnation": inc.index, "error_event": e.ref,
            "next_request_event": following.ref if following is not None else None}))
    return out


def _uncounted_faults(trace: Trace, inc: IncarnationRecord, intent: set[int]) -> list[Violation]:
    """From the fake's log: each failed request the agent lived past needs its own record."""
    requests = trace.requests_of(inc.index)
    failed = [r for r in requests if r.status != OK_STATUS]
    if inc.interrupted and requests and requests[-1].status != OK_STATUS:
        failed.pop()  # the kill may have come before the agent could record the last one
    recorded = sorted(s for s in intent if trace.owner(s) == inc.index)
    if len(failed) <= len(recorded):
        return []
    shown = ", ".join(f"request #{r.index}: {r.fault or r.status}" for r in failed)
    return [Violation(ID, (
        f"inc{inc.index} got {len(failed)} failed provider request(s) ({shown}) but committed only "
        f"{len(recorded)} retry_pending or run_finished(failed) record(s)"), {
        "incarnation": inc.index, "requests": [r.index for r in failed], "commits": recorded})]


def _owed_retry(t: Transcript, trace: Trace, inc: IncarnationRecord) -> list[Violation]:
    """A retry_pending still unresolved when a recovery starts must lead to a request."""
    before = inc.commits_before
    pending = [r for r in t.of_kind("retry_pending") if r.seq <= before]
    if not pending or inc.interrupted:
        return []
    last = pending[-1]
    if any(last.seq < m.seq <= before for m in t.messages):
        return []  # a later message resolved it
    if not any(r.seq <= before and (r.finished_seq is None or r.finished_seq > before) for r in t.runs):
        return []  # its run was closed: nothing is owed
    if trace.requests_of(inc.index) or trace.of_kind(K.PROVIDER_BEFORE, inc.index):
        return []
    # A cancel or an exhausted budget may close the run instead of retrying.
    for r in t.runs:
        if r.finished_seq is None or trace.owner(r.finished_seq) != inc.index:
            continue
        if r.outcome == Outcome.CANCELLED or "budget" in (r.reason or "").lower():
            return []
    return [Violation(ID, (
        f"retry_pending (attempt {last.data.get('attempt')}, commit {last.seq}) was unresolved when "
        f"inc{inc.index} started, but inc{inc.index} made no provider request"), {
        "incarnation": inc.index, "retry_seq": last.seq, "run": last.data.get("run_id")})]
