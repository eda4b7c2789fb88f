"""Folds the session log's entries into what the loop and recovery need to know. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from crashmatrix.agent.records import Entry, EntryType, Role


@dataclass
class RunInfo:
    run_id: str
    intent: str
    resumed_from: str | None = None
    resume_attempt: int = 0
    outcome: str | None = None
    reason: str | None = None

    @property
    def open(self) -> bool:
        return self.outcome is None


@dataclass
class PendingCall:
    """A call of the last assistant message that has no result yet."""

    call_id: str
    tool: str
    args_json: str
    started: Entry | None  # the tool_started record, if it was committed


@dataclass
class SessionState:
    runs: dict[str, RunInfo] = field(default_factory=dict)
    messages: list[Entry] = field(default_factory=list)
    queued_inputs: dict[str, str] = field(default_factory=dict)  # queued, not yet consumed
    seen_inputs: set[str] = field(default_factory=set)
    seen_cancels: set[str] = field(default_factory=set)
    last_retry: Entry | None = None  # a retry_pending not yet followed by a message
    started: list[Entry] = field(default_factory=list)  # tool_started records, in order
    replies: dict[str, int] = field(default_factory=dict)  # run id -> model replies committed
    entry_count: int = 0

    def open_runs(self) -> list[RunInfo]:
        return [r for r in self.runs.values() if r.open]

    def open_run(self) -> RunInfo | None:
        runs = self.open_runs()
        return runs[-1] if runs else None

    @property
    def tip(self) -> Entry | None:
        return self.messages[-1] if self.messages else None

    def chain_replies(self, run_id: str) -> int:
        """Model replies committed in this run and every run it resumed: the step count a
        limit holds against (a crash loop must not reset it)."""
        total = 0
        seen: set[str] = set()
        run: RunInfo | None = self.runs.get(run_id)
        while run is not None and run.run_id not in seen:
            seen.add(run.run_id)
            total += self.replies.get(run.run_id, 0)
            run = self.runs.get(run.resumed_from) if run.resumed_from else None
        return total

    def pending_calls(self) -> list[PendingCall]:
        return pending_calls(self.messages, self.started)


def _last_assistant_index(messages: list[Entry]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == Role.ASSISTANT:
            return i
    return None


def pending_calls(messages: list[Entry], started: list[Entry]) -> list[PendingCall]:
    """Calls of the last assistant message lacking a result among the messages after it.

    Results are matched by call id only within that window: call ids are the provider's, and a
    provider may reuse them across turns, so matching across the whole session would pair a new
    call with an old result.
    """
    index = _last_assistant_index(messages)
    if index is None:
        return []
    calls = messages[index].get("tool_calls") or []
    answered = {
        m.get("tool_call_id") for m in messages[index + 1 :] if m["role"] == Role.TOOL
    }
    last_assistant_id = messages[index]["id"]
    started_by_call = {
        s["call_id"]: s for s in started if s.get("assistant_id") == last_assistant_id
    }
    result = []
    for call in calls:
        if call["id"] in answered:
            continue
        fn: dict[str, Any] = call.get("function", {})
        result.append(
            PendingCall(
                call_id=call["id"],
                tool=str(fn.get("name", "")),
                args_json=str(fn.get("arguments", "")),
                started=started_by_call.get(call["id"]),
            )
        )
    return result


def fold(entries: Iterable[Entry], state: SessionState | None = None) -> SessionState:
    """Apply entries in log order to `state` (a new one if None) and return it."""
    state = SessionState() if state is None else state
    for e in entries:
        state.entry_count += 1
        kind = e.get("type")
        if kind == EntryType.RUN_STARTED:
            state.runs[e["run_id"]] = RunInfo(
                run_id=e["run_id"],
                intent=e["intent"],
                resumed_from=e.get("resumed_from"),
                resume_attempt=int(e.get("resume_attempt") or 0),
            )
        elif kind == EntryType.RUN_FINISHED:
            run = state.runs.get(e["run_id"])
            if run is not None:
                run.outcome = e["outcome"]
                run.reason = e.get("reason")
            if e.get("cancel_id"):
                state.seen_cancels.add(e["cancel_id"])
        elif kind == EntryType.MESSAGE:
            state.messages.append(e)
            state.last_retry = None
            if e.get("role") == Role.ASSISTANT:
                run_id = str(e.get("run_id"))
                state.replies[run_id] = state.replies.get(run_id, 0) + 1
        elif kind == EntryType.TOOL_STARTED:
            state.started.append(e)
        elif kind == EntryType.INPUT_QUEUED:
            state.queued_inputs[e["input_id"]] = e["text"]
            state.seen_inputs.add(e["input_id"])
        elif kind == EntryType.INPUT_CONSUMED:
            state.queued_inputs.pop(e["input_id"], None)
        elif kind == EntryType.RETRY_PENDING:
            state.last_retry = e
        elif kind == EntryType.NOTICE and e.get("cancel_id"):
            state.seen_cancels.add(e["cancel_id"])
    return state
