"""Invariant ids and the violation record every check returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from crashmatrix.harness.records.events import ProbeEvent


class InvariantId(StrEnum):
    """The promises the verifier checks (docs/invariants.md); the order is the report order."""

    # First: a second writer is the cause of whatever else it breaks (a damaged log, a double
    # effect), and a report should name the cause.
    ONE_WRITER = "one-writer"
    LOG_INTEGRITY = "log-integrity"
    PAIRING = "pairing"
    AT_MOST_ONCE = "at-most-once"
    NO_SILENT_SUCCESS = "no-silent-success"
    DOWNSTREAM_KEY = "downstream-key"
    STATUS_BEFORE_RESEND = "status-before-resend"
    DOWNSTREAM_BACKED = "downstream-backed"
    SAFE_RERUN = "safe-rerun"
    FINISHED_STAYS_FINISHED = "finished-stays-finished"
    CONTINUATION = "continuation"
    RESUME_BUDGET = "resume-budget"
    QUEUED_INPUT = "queued-input"
    RETRY_INTENT = "retry-intent"
    INTENT_BEFORE_EFFECT = "intent-before-effect"
    RESERVED_RESULT = "reserved-result"
    DURABLE_COMMITS = "durable-commits"
    FINAL_ENDS_RUN = "final-ends-run"
    RETRY_BOUND = "retry-bound"
    LIVENESS = "liveness"
    SCENARIO_ORACLE = "scenario-oracle"


@dataclass(frozen=True)
class Violation:
    """One broken promise: which, a sentence a person understands, and JSON-able evidence."""

    invariant: InvariantId
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"invariant": self.invariant.value, "message": self.message, "evidence": self.evidence}


@dataclass(frozen=True)
class NotApplicable:
    """An invariant the verifier cannot judge for this agent, and why: never reported as held."""

    invariant: InvariantId
    reason: str
    partly: bool = False  # part of the invariant was judged from other evidence; `reason` says which not

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"invariant": self.invariant.value, "reason": self.reason}
        if self.partly:
            out["partly"] = True
        return out


def event_ref(inc: int, event: ProbeEvent) -> str:
    """The short, stable name of a probe event in evidence: `inc2#7`."""
    return f"inc{inc}#{event.n}"


def event_text(inc: int, event: ProbeEvent) -> str:
    """An event as messages name it: `inc2#7 effect.after:append_note`."""
    return f"{event_ref(inc, event)} {event.point}"


def short(text: object, width: int = 80) -> str:
    """A one-line excerpt of a text for messages (evidence keeps the full value)."""
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[: width - 1] + "…"
