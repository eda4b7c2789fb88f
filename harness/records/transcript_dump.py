"""The store-dump format: an agent in any language prints its store as the canonical transcript. Pure.

An adapter whose agent cannot be read from Python (a framework's store in another language, a
binary format) lets the agent read its own store: a `dump` command prints one JSON object, the
last line of its stdout, in this shape (docs/architecture.md, "The canonical transcript"):

    {"format": 1, "commits": 3, "labels": {"1": "message.user", ...},
     "messages": [{"seq": 1, "role": "user", "content": "..."},
                  {"seq": 2, "role": "assistant", "calls": [{"call_id": "c1", "tool": "read",
                                                            "arguments": "{\"path\": \"x\"}"}]},
                  {"seq": 3, "role": "tool", "call_id": "c1", "content": "..."}],
     "runs": [{"run_id": "run-1", "seq": 1, "outcome": "completed", "finished_seq": 3}],
     "starts": [], "records": [], "integrity_error": null}

Only `format` and `commits` are required. A result that recovery wrote rather than the tool
says how (`"recovered": "unknown"`: the outcome is unknown; `"rerun"`: the call was run again).
`seq` is the commit that first held the message,
numbered as the agent's commit probes number them. `arguments` is the call's arguments as the
model sent them (a JSON text). A store the agent itself could not read is `integrity_error`.
Anything else (an unknown key, a wrong type, a seq past `commits`) is refused naming the field.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import msgspec

from crashmatrix.harness.records.transcript import Call, Message, Record, Run, ToolStart, Transcript

FORMAT = 1


class DumpError(ValueError):
    """A dump that is not the format: the message names the field."""


class _Call(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    call_id: str
    tool: str
    arguments: str


class _Message(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    seq: int
    role: Literal["user", "assistant", "tool", "system"]
    content: str | None = None
    calls: list[_Call] = []
    call_id: str | None = None
    tool: str | None = None
    is_error: bool = False
    recovered: Literal["rerun", "unknown"] | None = None  # a result recovery wrote: how
    msg_id: str | None = None
    run_id: str = ""


class _Run(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    run_id: str
    seq: int
    intent: str = "prompt"
    outcome: str | None = None
    reason: str | None = None
    finished_seq: int | None = None
    resumed_from: str | None = None
    resume_attempt: int = 0


class _Start(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    seq: int
    run_id: str
    call_id: str
    tool: str
    args: Any = None
    replay: str = "never"
    result_id: str | None = None


class _Record(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    seq: int
    kind: str
    data: dict[str, Any] = {}


class _Dump(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    format: int
    commits: int
    labels: dict[int, str] = {}
    messages: list[_Message] = []
    runs: list[_Run] = []
    starts: list[_Start] = []
    records: list[_Record] = []
    integrity_error: str | None = None


def parse_dump(text: str) -> Transcript:
    """The transcript a dump's JSON describes; DumpError naming what is wrong."""
    try:
        dump = msgspec.json.decode(text.encode(), type=_Dump)
    except msgspec.ValidationError as exc:
        raise DumpError(f"the dump is not a transcript: {exc}") from None
    except msgspec.DecodeError as exc:
        raise DumpError(f"the dump is not JSON: {exc}") from None
    if dump.format != FORMAT:
        raise DumpError(f"the dump's format is {dump.format}; this crashmatrix reads format {FORMAT}")
    if dump.commits < 0:
        raise DumpError(f"`$.commits`: {dump.commits} is negative")
    seqs = [("labels", k) for k in dump.labels] + [
        (f"messages[{i}].seq", m.seq) for i, m in enumerate(dump.messages)] + [
        (f"runs[{i}].seq", r.seq) for i, r in enumerate(dump.runs)] + [
        (f"starts[{i}].seq", s.seq) for i, s in enumerate(dump.starts)] + [
        (f"records[{i}].seq", r.seq) for i, r in enumerate(dump.records)]
    for where, seq in seqs:
        if not 1 <= seq <= dump.commits:
            raise DumpError(f"`$.{where}`: commit {seq} is not one of the store's {dump.commits} commits")
    return Transcript(
        runs=[Run(r.run_id, r.seq, r.intent, r.resumed_from, r.resume_attempt, r.outcome, r.reason,
                  r.finished_seq) for r in dump.runs],
        messages=[Message(seq=m.seq, msg_id=m.msg_id or f"m{k}", run_id=m.run_id, role=m.role,
                          content=m.content, calls=tuple(_call(c) for c in m.calls),
                          call_id=m.call_id, tool=m.tool, is_error=m.is_error, recovered=m.recovered)
                  for k, m in enumerate(dump.messages, 1)],
        starts=[ToolStart(s.seq, s.run_id, s.call_id, s.tool, s.args, s.replay, s.result_id)
                for s in dump.starts],
        records=[Record(r.seq, r.kind, dict(r.data)) for r in dump.records],
        commits=dump.commits, labels=dict(dump.labels), integrity_error=dump.integrity_error)


def _call(c: _Call) -> Call:
    try:
        args = json.loads(c.arguments)
    except ValueError:
        args = None  # kept raw, as calls_of keeps a call with broken arguments
    return Call(c.call_id, c.tool, args, c.arguments)
