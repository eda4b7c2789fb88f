"""What a request's history shows (results, turns, user text) and whether a condition holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from crashmatrix.scenarios.model import Condition, ResultKey, ResultStatus


@dataclass(frozen=True)
class ToolResult:
    """One `tool` message, joined to the call it answers."""

    tool: str
    path: str | None  # the call's `path` argument, normalised, when it has one
    content: str
    status: ResultStatus  # OK, ERROR or UNKNOWN

    def matches(self, key: ResultKey) -> bool:
        return self.tool == key.tool and (key.path is None or self.path == key.path)


def text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content array."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def status_of(content: str, unknown_marker: str) -> ResultStatus:
    # The agent's synthetic unknown-outcome result also starts with "ERROR: ", so check it first.
    if unknown_marker in content:
        return ResultStatus.UNKNOWN
    if content.startswith("ERROR: "):
        return ResultStatus.ERROR
    return ResultStatus.OK


def _call_path(arguments: Any) -> str | None:
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return None
    path = args.get("path") if isinstance(args, dict) else None
    return str(PurePosixPath(path)) if isinstance(path, str) and path else None


class Conversation:
    """A read-only view of one request's `messages`; built once per request."""

    def __init__(self, messages: list[Any], unknown_marker: str) -> None:
        calls: dict[str, tuple[str, str | None]] = {}  # call id -> (tool, path)
        self.results: list[ToolResult] = []
        self.last_turn: list[ToolResult] = []
        self.user_texts: list[str] = []
        self.turns = 0
        self.tool_calls_so_far = 0
        self.last_role: str | None = None
        turn_ids: set[str] = set()
        for m in messages:
            if not isinstance(m, dict):
                continue
            role = m.get("role")
            if role in {"system", "developer"}:
                continue
            self.last_role = role if isinstance(role, str) else None
            if role == "user":
                self.user_texts.append(text_of(m.get("content")))
            elif role == "assistant":
                self.turns += 1
                tool_calls = m.get("tool_calls") or []
                if tool_calls:
                    self.last_turn = []
                    turn_ids = set()
                for c in tool_calls:
                    if not isinstance(c, dict):
                        continue
                    fn = c.get("function")
                    fn = fn if isinstance(fn, dict) else {}
                    call_id = str(c.get("id"))
                    calls[call_id] = (str(fn.get("name", "")), _call_path(fn.get("arguments")))
                    turn_ids.add(call_id)
                    self.tool_calls_so_far += 1
            elif role == "tool":
                call_id = str(m.get("tool_call_id"))
                tool, path = calls.get(call_id, ("", None))
                content = text_of(m.get("content"))
                result = ToolResult(tool, path, content, status_of(content, unknown_marker))
                self.results.append(result)
                if call_id in turn_ids:
                    self.last_turn.append(result)

    def latest(self, key: ResultKey, *, last_turn: bool = False) -> ToolResult | None:
        pool = self.last_turn if last_turn else self.results
        for r in reversed(pool):
            if r.matches(key):
                return r
        return None


def _status_ok(result: ToolResult | None, wanted: frozenset[ResultStatus]) -> bool:
    if result is None:
        return ResultStatus.NONE in wanted
    return ResultStatus.ANY in wanted or result.status in wanted


def holds(cond: Condition, conv: Conversation) -> bool:
    """Every test in the condition holds for this conversation (an empty condition holds)."""
    for key, wanted in cond.results.items():
        if not _status_ok(conv.latest(key), wanted):
            return False
    for key, wanted in cond.last_turn.items():
        if not _status_ok(conv.latest(key, last_turn=True), wanted):
            return False
    for key, text in cond.contains.items():
        r = conv.latest(key)
        if r is None or text not in r.content:
            return False
    for key, text in cond.lacks.items():
        r = conv.latest(key)
        if r is not None and text in r.content:
            return False
    if cond.user_contains is not None and not any(cond.user_contains in t
                                                  for t in conv.user_texts):
        return False
    if cond.user_lacks is not None and any(cond.user_lacks in t for t in conv.user_texts):
        return False
    if cond.last_role is not None and conv.last_role != cond.last_role.value:
        return False
    if cond.turns is not None and conv.turns != cond.turns:
        return False
    if cond.min_turns is not None and conv.turns < cond.min_turns:
        return False
    return cond.max_turns is None or conv.turns <= cond.max_turns
