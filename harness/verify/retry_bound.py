"""retry-bound: a step's retries and a run chain's replies stop at max_retries and max_steps, exactly."""

from __future__ import annotations

import json
from typing import Any

from crashmatrix.harness.records.observation import Observation, Request
from crashmatrix.harness.records.transcript import Record, Transcript
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.off_by import off_by
from crashmatrix.harness.verify.step_limit import check_step_limit
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Outcome, Scenario

ID = InvariantId.RETRY_BOUND
SYSTEM = "system"
RATE_LIMITED = 429
SERVER_ERROR = 500
NO_RESPONSE = 0  # a timeout or a dropped connection: nothing was sent back


def check_retry_bound(obs: Observation, scenario: Scenario) -> list[Violation]:
    limit = scenario.agent.max_retries
    out = _attempt_numbers(obs.transcript, limit) if obs.store_read else []
    out += _failures_per_step(obs, limit)
    if obs.store_read:
        out += _gave_up_early(obs, limit)
        out += check_step_limit(obs, scenario.agent.max_steps)
    return out


def retryable(r: Request) -> bool:
    """A failure the agent may retry: 429, a 5xx, or no response at all (timeout, drop)."""
    return r.status in (RATE_LIMITED, NO_RESPONSE) or r.status >= SERVER_ERROR


def _attempt_numbers(t: Transcript, limit: int) -> list[Violation]:
    """From the store: within a step (between two committed messages), the retry_pending
    attempts count up by one from the step's first (a positive number), across crashes too, and
    none exceeds max_retries. The first break of a step is reported; the records after it follow
    from it."""
    message_seqs = sorted(m.seq for m in t.messages)
    out: list[Violation] = []
    previous: Record | None = None
    reported = False
    for r in t.of_kind("retry_pending"):
        attempt = r.data.get("attempt")
        if previous is not None and any(previous.seq < s <= r.seq for s in message_seqs):
            previous, reported = None, False  # a message in between began a new step
        before, previous = previous, r
        if reported:
            continue
        if before is None and _int(attempt) < 1:
            out.append(Violation(ID, (
                f"retry_pending at commit {r.seq} records attempt {attempt!r}; an attempt is a "
                "positive number"), {"seq": r.seq, "attempt": attempt, "run": r.data.get("run_id")}))
            reported = True
        elif before is not None and attempt != _int(before.data.get("attempt")) + 1:
            expected = _int(before.data.get("attempt")) + 1
            out.append(Violation(ID, (
                f"retry_pending at commit {r.seq} records attempt {attempt}, after attempt "
                f"{before.data.get('attempt')} at commit {before.seq} with no message in between; "
                f"the attempts of one step count up by one ({expected} expected), across crashes "
                "too"), {
                "seq": r.seq, "attempt": attempt, "expected": expected, "previous_seq": before.seq,
                "run": r.data.get("run_id")}))
            reported = True
        elif _int(attempt) > limit:
            out.append(Violation(ID, (
                f"retry_pending at commit {r.seq} records attempt {attempt}, past max_retries "
                f"{limit}; the run must end failed instead"), {
                "seq": r.seq, "attempt": attempt, "max_retries": limit, "run": r.data.get("run_id")}))
            reported = True
    return out


def _failures_per_step(obs: Observation, limit: int) -> list[Violation]:
    """From the provider's log: the requests that carried one history (one step) failed with a
    retryable error at most max_retries + 1 times, plus one for each crash that may have come
    between a failure and its record."""
    trace = Trace.of(obs)
    steps: dict[str, list[Request]] = {}
    for r in obs.requests:
        if retryable(r):
            steps.setdefault(_key(r.messages), []).append(r)
    if not steps:
        return []
    lost: dict[str, int] = {}
    for inc in obs.incarnations:
        sent = trace.requests_of(inc.index)
        if inc.interrupted and sent and retryable(sent[-1]):
            # Killed (or its commit failed) after its last request failed: its record may be lost.
            key = _key(sent[-1].messages)
            lost[key] = lost.get(key, 0) + 1
    out: list[Violation] = []
    for key, failed in steps.items():
        allowed = limit + 1 + lost.get(key, 0)
        if len(failed) <= allowed:
            continue
        shown = ", ".join(f"#{r.index} ({r.fault or r.status})" for r in failed)
        size = len(_body(failed[0].messages))
        lost_here = lost.get(key, 0)
        out.append(Violation(ID, (
            f"one step (the same history of {size} message(s) after the system message) got "
            f"{len(failed)} provider requests that failed with a retryable error: {shown}; max_retries "
            f"{limit} allows {limit + 1}, plus one for each crash right after a failed request of "
            f"the step ({lost_here}), so at most {allowed}; the attempt count must survive "
            f"crashes (the limit was passed {off_by(len(failed), allowed)})"), {
            "requests": [r.index for r in failed], "max_retries": limit,
            "lost_records": lost_here, "allowed": allowed, "history_messages": size}))
    return out


def _gave_up_early(obs: Observation, limit: int) -> list[Violation]:
    """The last run ended failed right after a retryable failure (it gave up retrying) although
    the provider had failed no more than max_retries times in the whole case: a give-up must come
    at the failure after the max_retries-th retry. Every retryable failure of the case counts, so
    an agent that counts retries per run rather than per step, or lost a count to a crash, is
    never called early; only one that stopped before any count allows it."""
    runs = obs.transcript.runs
    last = max(runs, key=lambda r: r.seq) if runs else None
    if last is None or last.outcome != Outcome.FAILED or not obs.requests:
        return []
    if not retryable(obs.requests[-1]):
        return []  # it ended on a refusal (a 4xx) or a limit of its own, not by giving up
    failed = [r for r in obs.requests if retryable(r)]
    if len(failed) > limit:
        return []
    shown = ", ".join(f"#{r.index} ({r.fault or r.status})" for r in failed)
    return [Violation(ID, (
        f"run {last.run_id} ended failed at commit {last.finished_seq} after {len(failed)} "
        f"retryable provider failure(s) in all ({shown}); max_retries {limit} allows {limit} "
        f"retries, so a run gives up at failure {limit + 1}: it gave up "
        f"{off_by(len(failed), limit + 1)}"), {
        "run": last.run_id, "finished_seq": last.finished_seq, "failures": len(failed),
        "requests": [r.index for r in failed], "max_retries": limit})]


def _key(messages: list[dict[str, Any]]) -> str:
    """One step's identity: the exact history a request carried (the system message aside)."""
    return json.dumps(_body(messages), sort_keys=True, ensure_ascii=False, default=str)


def _body(messages: list[dict[str, Any]]) -> list[Any]:
    if messages and isinstance(messages[0], dict) and messages[0].get("role") == SYSTEM:
        return list(messages[1:])
    return list(messages)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
