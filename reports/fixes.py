"""How agents usually fix a broken promise: one or two lines per invariant, shown beside each
violation in the reports, the same words as docs/invariants.md's "How agents usually fix it"
(tests/unit/test_fixes.py keeps the two in step). Pure."""

from __future__ import annotations

from collections.abc import Iterable

from crashmatrix.harness.records.results import CaseResult
from crashmatrix.harness.records.violation import InvariantId

DOC = "docs/invariants.md"

FIXES: dict[InvariantId, str] = {
    InvariantId.ONE_WRITER: (
        "Take an exclusive lock on the session before the first write (flock on a lock file, or a "
        "lease row); a second process that finds it held exits, naming the holder, and writes nothing."),
    InvariantId.LOG_INTEGRITY: (
        "Write each commit whole and sync it (append then fsync, or a temp file, fsync, rename and a "
        "sync of the folder); on open, drop a torn last record instead of failing on it or reading it."),
    InvariantId.PAIRING: (
        "Store a result for every tool call before the next model request; on recovery, answer each "
        "call left without one exactly once (re-run if safe, else an 'outcome unknown' result)."),
    InvariantId.AT_MOST_ONCE: (
        "Record the intent (call id, arguments) before a non-idempotent tool runs; on recovery a call "
        "with an intent and no result is not simply re-run: ask the system it acted on, or say unknown."),
    InvariantId.NO_SILENT_SUCCESS: (
        "When recovery cannot know whether a tool's effect happened, tell the model so (an 'outcome "
        "unknown' result), never a success there is no evidence for."),
    InvariantId.DOWNSTREAM_KEY: (
        "Send every non-idempotent request with an idempotency key derived from the call id (the same "
        "after a restart), so the service can deduplicate a resend."),
    InvariantId.STATUS_BEFORE_RESEND: (
        "Before resending a request whose reply was lost, ask the service for the status of its key; "
        "resend only when it says the request was not applied."),
    InvariantId.DOWNSTREAM_BACKED: (
        "Report a downstream effect as done only from the service's own answer (its reply or a status "
        "query), never from having sent the request."),
    InvariantId.SAFE_RERUN: (
        "Re-run on recovery only the tools declared safe to repeat (read-only or idempotent); give "
        "every tool a replay policy and honour it."),
    InvariantId.FINISHED_STAYS_FINISHED: (
        "Check the store for the run's final outcome before resuming: a run that completed, was "
        "cancelled or stopped is left closed."),
    InvariantId.CONTINUATION: (
        "Rebuild each request from the committed history exactly as stored, so what the model is sent "
        "is always a prefix of the final transcript: never a rewritten or reordered history."),
    InvariantId.RESUME_BUDGET: (
        "Count a run's resumes in the store and close it as failed once the budget is spent, so a "
        "crash loop ends."),
    InvariantId.QUEUED_INPUT: (
        "Persist an input that arrives while a run is busy (an inbox) before acknowledging it, and "
        "deliver each exactly once, after a crash too."),
    InvariantId.RETRY_INTENT: (
        "After a failed model request, commit the retry (attempt, reason) or the run's failure before "
        "doing anything else; on recovery, a pending retry leads to a request."),
    InvariantId.INTENT_BEFORE_EFFECT: (
        "Commit the tool call's start durably before the tool runs (write-ahead), so no crash can "
        "leave an effect with no record of it."),
    InvariantId.RESERVED_RESULT: (
        "Reserve the result's id when the tool starts and store every answer to that call under it, "
        "on the normal path, a re-run and an unknown outcome alike."),
    InvariantId.DURABLE_COMMITS: (
        "Acknowledge a commit only once it is durable (synced), and never rewrite or drop an "
        "acknowledged one during recovery."),
    InvariantId.FINAL_ENDS_RUN: (
        "Once a final answer is committed, recovery ends the run there: make no further model request "
        "for it unless a new user message starts a new run."),
    InvariantId.RETRY_BOUND: (
        "Keep the retry count of a step in the store (not in memory) so it survives crashes, and stop "
        "at max_retries."),
    InvariantId.LIVENESS: (
        "Make recovery total: every state a crash can leave (a torn tail, an open call, a pending "
        "retry) has a rule that leads to an outcome; exit 0 or 1, never hang."),
    InvariantId.SCENARIO_ORACLE: (
        "Read the other violations first (they say why); when there are none, compare the files and "
        "the outcome with the scenario's [expect] table."),
}


def fix_of(invariant: str) -> str | None:
    """The hint for `invariant` (an id as results store it), or None for an unknown one."""
    try:
        return FIXES[InvariantId(invariant)]
    except ValueError:
        return None


def doc_link(invariant: str) -> str:
    """Where its section is: the docs page and the heading's anchor."""
    return f"{DOC}#{invariant}"


def violated_fixes(results: Iterable[CaseResult]) -> list[tuple[str, str]]:
    """(invariant, hint) for each invariant some case violated, in the verifier's order."""
    seen = {i for r in results for i in r.invariants}
    return [(i.value, text) for i, text in FIXES.items() if i.value in seen]
