"""The canonical transcript: any agent's store, read by its adapter into one shape the verifier knows."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Call:
    call_id: str
    tool: str
    args: Any  # parsed arguments (None when they were not valid JSON)
    raw_args: str


def calls_of(raw_calls: Any) -> tuple[Call, ...]:
    """Tool calls in the OpenAI wire shape (`[{"id", "function": {"name", "arguments"}}]`)."""
    calls = []
    for c in raw_calls or []:
        raw = str(c["function"]["arguments"])
        try:
            args = json.loads(raw)
        except ValueError:
            args = None  # kept raw: a call with broken arguments is still a call
        calls.append(Call(str(c["id"]), str(c["function"]["name"]), args, raw))
    return tuple(calls)


@dataclass(frozen=True)
class Message:
    seq: int  # the commit that holds it
    msg_id: str
    run_id: str
    role: str  # user | assistant | tool
    content: str | None
    calls: tuple[Call, ...] = ()
    call_id: str | None = None  # tool results: the call answered
    tool: str | None = None
    is_error: bool = False
    recovered: str | None = None  # rerun | unknown
    terminate: bool = False

    def line(self, shorten: Callable[[str, int], str] = lambda text, width: text) -> str:
        """The message in one line, as `repro` and the reports show the store: role, recovery
        mark, calls or result or text. `shorten(text, width)` clips each part (repro does; the
        evidence keeps the whole)."""
        mark = f" [{self.recovered}]" if self.recovered else ""
        if self.calls:
            body = "; ".join(f"{c.call_id} {c.tool}({shorten(c.raw_args, 50)})" for c in self.calls)
        elif self.role == "tool":
            body = f"{self.call_id}: {shorten(self.content or '', 60)}"
        else:
            body = shorten(self.content or "", 70)
        error = " (error)" if self.is_error else ""
        return f"{self.role}{mark}{error}: {body}"

    def wire(self) -> dict[str, Any]:
        """The OpenAI chat form a correct agent must send for this message."""
        if self.role == "tool":
            return {"role": "tool", "tool_call_id": self.call_id, "content": self.content or ""}
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.calls:
            out["tool_calls"] = [
                {"id": c.call_id, "type": "function",
                 "function": {"name": c.tool, "arguments": c.raw_args}}
                for c in self.calls
            ]
        return out


@dataclass(frozen=True)
class Run:
    run_id: str
    seq: int
    intent: str  # prompt | resume
    resumed_from: str | None = None
    resume_attempt: int = 0
    outcome: str | None = None
    reason: str | None = None
    finished_seq: int | None = None


@dataclass(frozen=True)
class ToolStart:
    seq: int
    run_id: str
    call_id: str
    tool: str
    args: Any
    replay: str
    result_id: str | None = None


@dataclass(frozen=True)
class Record:
    """Any other record that matters to an invariant (inputs, retries, notices)."""

    seq: int
    kind: str  # input_queued | input_consumed | retry_pending | notice
    data: dict[str, Any]


@dataclass
class Transcript:
    runs: list[Run] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    starts: list[ToolStart] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    commits: int = 0
    # Each commit's label by seq, as the agent's commit probes name it (durable-commits compares
    # them); empty when the adapter does not say, and then only the seqs are compared.
    labels: dict[int, str] = field(default_factory=dict)
    # Set when the store could not be read: that alone violates log-integrity.
    integrity_error: str | None = None
    # Set when the reader had to drop a torn last commit (legal after a crash, reported).
    torn_tail: str | None = None

    def run(self, run_id: str) -> Run | None:
        return next((r for r in self.runs if r.run_id == run_id), None)

    def of_kind(self, kind: str) -> list[Record]:
        return [r for r in self.records if r.kind == kind]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
