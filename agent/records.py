"""The session log's entry types and their closed vocabularies (docs/architecture.md, "The session log")."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

Entry = dict[str, Any]


class EntryType(StrEnum):
    RUN_STARTED = "run_started"
    MESSAGE = "message"
    TOOL_STARTED = "tool_started"
    RUN_FINISHED = "run_finished"
    INPUT_QUEUED = "input_queued"
    INPUT_CONSUMED = "input_consumed"
    RETRY_PENDING = "retry_pending"
    NOTICE = "notice"


class Intent(StrEnum):
    PROMPT = "prompt"
    RESUME = "resume"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Outcome(StrEnum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    ABORTED = "aborted"
    FAILED = "failed"


class Replay(StrEnum):
    SAFE = "safe"
    NEVER = "never"


class Recovered(StrEnum):
    RERUN = "rerun"
    UNKNOWN = "unknown"


# The text of a synthetic result for a call whose outcome cannot be known. The model must be told
# the truth: the effect may or may not have happened, and nothing was re-run.
UNKNOWN_OUTCOME_TEXT = (
    "ERROR: the run was interrupted before this call's result was saved. "
    "The external outcome is unknown: the tool may or may not have taken effect. "
    "The call was not re-run automatically; check the current state before repeating it."
)

SKIPPED_TEXT = "ERROR: not run: the run was stopped before this call started."


def run_started(
    run_id: str,
    intent: Intent,
    resumed_from: str | None = None,
    resume_attempt: int | None = None,
) -> Entry:
    entry: Entry = {"type": EntryType.RUN_STARTED.value, "run_id": run_id, "intent": intent.value}
    if resumed_from is not None:
        entry["resumed_from"] = resumed_from
        entry["resume_attempt"] = resume_attempt
    return entry


def message(
    msg_id: str,
    run_id: str,
    role: Role,
    content: str | None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    tool_call_id: str | None = None,
    tool_name: str | None = None,
    is_error: bool = False,
    recovered: Recovered | None = None,
    terminate: bool = False,
) -> Entry:
    entry: Entry = {
        "type": EntryType.MESSAGE.value,
        "id": msg_id,
        "run_id": run_id,
        "role": role.value,
        "content": content,
    }
    if tool_calls:
        entry["tool_calls"] = tool_calls
    if tool_call_id is not None:
        entry["tool_call_id"] = tool_call_id
    if tool_name is not None:
        entry["tool_name"] = tool_name
    if is_error:
        entry["is_error"] = True
    if recovered is not None:
        entry["recovered"] = recovered.value
    if terminate:
        entry["terminate"] = True
    return entry


def tool_started(
    run_id: str,
    assistant_id: str,
    call_id: str,
    tool: str,
    args: Any,
    result_id: str,
    replay: Replay,
) -> Entry:
    return {
        "type": EntryType.TOOL_STARTED.value,
        "run_id": run_id,
        "assistant_id": assistant_id,
        "call_id": call_id,
        "tool": tool,
        "args": args,
        "result_id": result_id,
        "replay": replay.value,
    }


def run_finished(run_id: str, outcome: Outcome, reason: str | None = None) -> Entry:
    entry: Entry = {"type": EntryType.RUN_FINISHED.value, "run_id": run_id, "outcome": outcome.value}
    if reason is not None:
        entry["reason"] = reason
    return entry


def input_queued(input_id: str, text: str) -> Entry:
    return {"type": EntryType.INPUT_QUEUED.value, "input_id": input_id, "text": text}


def input_consumed(input_id: str, message_id: str) -> Entry:
    return {"type": EntryType.INPUT_CONSUMED.value, "input_id": input_id, "message_id": message_id}


def retry_pending(run_id: str, attempt: int, delay_s: float, reason: str) -> Entry:
    return {
        "type": EntryType.RETRY_PENDING.value,
        "run_id": run_id,
        "attempt": attempt,
        "delay_s": delay_s,
        "reason": reason,
    }


def notice(run_id: str, text: str) -> Entry:
    return {"type": EntryType.NOTICE.value, "run_id": run_id, "text": text}


def commit_label(entries: list[Entry]) -> str:
    """A short, deterministic name for a commit, used as the probe label of its boundaries.

    Messages name their role (and tool, for results) so a crash point reads like
    `commit.after:message.tool.append_note` rather than an opaque sequence number.
    """
    parts: list[str] = []
    for e in entries:
        kind = e["type"]
        if kind == EntryType.MESSAGE:
            part = f"message.{e['role']}"
            if e.get("tool_name"):
                part += f".{e['tool_name']}"
        elif kind == EntryType.TOOL_STARTED:
            part = f"tool_started.{e['tool']}"
        elif kind == EntryType.RUN_FINISHED:
            part = f"run_finished.{e['outcome']}"
        elif kind == EntryType.RUN_STARTED:
            part = f"run_started.{e['intent']}"
        else:
            part = str(kind)
        if not parts or parts[-1] != part:
            parts.append(part)
    # "," not "+": case ids join crash steps with "+", and labels appear inside case ids.
    return ",".join(parts)
