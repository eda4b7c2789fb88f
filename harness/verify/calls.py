"""Tool calls and their results, paired within the window of tool messages after each assistant."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crashmatrix.harness.records.transcript import Call, Message, ToolStart, Transcript
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Role


@dataclass(frozen=True)
class CallSite:
    """One call of one assistant message: a model that re-issues a call makes a new site."""

    index: int  # position among all sites, in transcript order
    assistant: Message
    call: Call
    results: tuple[Message, ...]  # the tool messages in its window that answer it
    start: ToolStart | None  # its tool_started record, if one was committed

    @property
    def call_id(self) -> str:
        return self.call.call_id

    @property
    def tool(self) -> str:
        return self.call.tool

    @property
    def name(self) -> str:
        """How messages name the call: `call call_1 (append_note)`."""
        return f"call {self.call_id} ({self.tool})"

    def arg(self, key: str) -> str | None:
        """A string argument, or None when the arguments lack it or are not an object."""
        args: Any = self.start.args if self.start is not None else self.call.args
        if not isinstance(args, dict):
            args = self.call.args
        value = args.get(key) if isinstance(args, dict) else None
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class CallTable:
    sites: tuple[CallSite, ...]
    orphans: tuple[Message, ...]  # tool results that answer no call of the assistant before them

    def of_tool(self, tool: str) -> list[CallSite]:
        return [s for s in self.sites if s.tool == tool]


def call_table_of(trace: Trace) -> CallTable:
    """The call table of the judged transcript, built once per judgement (six checks read it)."""
    return trace.view(_table)


def _table(trace: Trace) -> CallTable:
    return call_table(trace.obs.transcript)


def call_table(t: Transcript) -> CallTable:
    """Pair calls with results by call id *within each window only*: providers reuse call ids
    across turns, so matching across the session would pair a new call with an old result."""
    windows: list[tuple[Message, list[Message]]] = []
    orphans: list[tuple[int, Message]] = []  # with their position, to report in log order
    current: tuple[Message, list[Message]] | None = None
    position = {id(m): k for k, m in enumerate(t.messages)}
    for k, m in enumerate(t.messages):
        if m.role == Role.TOOL:
            if current is None:
                orphans.append((k, m))
            else:
                current[1].append(m)
            continue
        current = (m, []) if m.role == Role.ASSISTANT and m.calls else None
        if current is not None:
            windows.append(current)

    assistant_seqs = sorted(m.seq for m in t.messages if m.role == Role.ASSISTANT)
    sites: list[CallSite] = []
    for assistant, window in windows:
        ids = {c.call_id for c in assistant.calls}
        orphans.extend((position[id(m)], m) for m in window if m.call_id not in ids)
        later = [s for s in assistant_seqs if s > assistant.seq]
        bound = later[0] if later else None
        for call in assistant.calls:
            start = next((s for s in t.starts if s.call_id == call.call_id and s.seq > assistant.seq
                          and (bound is None or s.seq < bound)), None)
            results = tuple(m for m in window if m.call_id == call.call_id)
            sites.append(CallSite(len(sites), assistant, call, results, start))
    orphans.sort(key=lambda pair: pair[0])
    return CallTable(tuple(sites), tuple(m for _, m in orphans))


def contradicts(where: Mapping[str, Any], site: CallSite) -> bool:
    """Whether the call's arguments (as it started, else as the model asked) give a field of
    `where` another value: it made some other record, or sent to another service (an email to
    Bob is no email to Ana)."""
    args = site.start.args if site.start is not None and isinstance(site.start.args, dict) else site.call.args
    return isinstance(args, dict) and any(k in args and args[k] != v for k, v in where.items())
