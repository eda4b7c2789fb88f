"""continuation: every request carries the committed history exactly: task once, nothing invented.

"Exactly" is what the model sees, not the wire dict: role, text, the call a result answers, and
each call's id, tool and arguments as data. A client that adds a key the model does not read
(LangChain JS sends `name` on tool messages, some SDKs `refusal: null`), sends text as a list of
parts, or serialises the same arguments with other spacing or key order carries the same history;
a changed argument, text, id or order does not.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation, short
from crashmatrix.scenarios.model import Role, Scenario

ID = InvariantId.CONTINUATION
SYSTEM = "system"
TEXT_PARTS = ("text", "input_text", "output_text")  # the part types that carry text
SENDERS_NAMED = ("user", "system")  # roles whose `name` is part of what the model is told


def check_continuation(obs: Observation, scenario: Scenario) -> list[Violation]:
    # Requests happen at different points of the history, so each must be a prefix of the final
    # store's wire form; any divergence is history the agent invented, dropped or reordered.
    wire = [m.wire() for m in obs.transcript.messages]
    committed = [_Committed(m) for m in wire]
    allowed = {scenario.task} | {d.text for d in obs.deliveries if d.kind == "input"}
    diverged: list[tuple[int, int, Any, Any]] = []
    task_counts: list[tuple[int, int]] = []
    foreign: dict[str, list[tuple[int, int]]] = {}
    for r in obs.requests:
        body = _body(r.messages)
        # Without the store there is no committed history to compare with; what a request carries
        # on its own (the task once, no invented user message) is still judged.
        pos = _first_difference(body, committed) if obs.store_read else None
        if pos is not None:
            diverged.append((r.index, pos, _at(body, pos), _at(wire, pos)))
        users = [(k, m) for k, m in enumerate(body) if isinstance(m, dict) and m.get("role") == Role.USER]
        count = sum(1 for _, m in users if _text(m.get("content")) == scenario.task)
        if count != 1:
            task_counts.append((r.index, count))
        for k, m in users:
            text = _text(m.get("content"))
            if not isinstance(text, str) or text not in allowed:
                foreign.setdefault(str(text), []).append((r.index, k))
    out: list[Violation] = []
    if diverged:
        index, pos, sent, committed = diverged[0]
        more = f"; {len(diverged) - 1} later request(s) differ too" if len(diverged) > 1 else ""
        out.append(Violation(ID, (
            f"request #{index} differs from the committed history at message index {pos} (after the "
            f"system message): it sent {_describe(sent)}, the store holds {_describe(committed)}{more}"), {
            "request": index, "position": pos, "sent": sent, "committed": committed,
            "requests": [d[0] for d in diverged]}))
    if task_counts:
        index, count = task_counts[0]
        what = "does not carry the task" if count == 0 else f"carries the task {count} times"
        out.append(Violation(ID, (
            f"request #{index} {what}; every request must carry the original task exactly once "
            "(no re-sent task)"), {
            "request": index, "task_count": count,
            "requests": {str(i): c for i, c in task_counts}}))
    for text, where in foreign.items():
        index, pos = where[0]
        out.append(Violation(ID, (
            f"request #{index} sent a user message {short(text, 40)!r} (message index {pos}, after "
            "the system message) that is neither the task nor a delivered input; a continuation adds "
            "no user message such as a bare \"continue\""), {
            "request": index, "position": pos, "text": text,
            "requests": sorted({i for i, _ in where})}))
    return out


def _body(messages: list[dict[str, Any]]) -> list[Any]:
    if messages and isinstance(messages[0], dict) and messages[0].get("role") == SYSTEM:
        return list(messages[1:])
    return list(messages)


def model_view(m: Any) -> Any:
    """What the model reads of one chat message, as plain data: role, text, the call a result
    answers, each call's id, tool and arguments as data, a user's or system message's `name`
    (a participant the model is told about; on an assistant message or a tool result a
    framework repeats its agent's or the call's tool's name, which LangChain JS and Agent
    Framework send and a store need not keep) and a legacy `function_call`. A message that is
    not that shape is itself, marked malformed, so it differs from every committed message (and
    never breaks the check)."""
    if not isinstance(m, dict):
        return ("malformed", _data(m))
    raw_calls = m.get("tool_calls")
    if raw_calls is not None and not (isinstance(raw_calls, list) and all(
            isinstance(c, dict) and isinstance(c.get("function"), dict) for c in raw_calls)):
        return ("malformed", _data(m))
    calls = tuple((c.get("id"), c["function"].get("name"), _arguments(c["function"].get("arguments")))
                  for c in raw_calls or ())
    role = m.get("role")
    legacy = m.get("function_call")
    return (role, _text(m.get("content")), m.get("tool_call_id"), calls,
            m.get("name") if role in SENDERS_NAMED else None,
            None if legacy is None else _data(legacy))


def _data(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _text(content: Any) -> Any:
    """The text of a message's content: a string, or the one text part of a list; several text
    parts are their texts in order; "" for none (an assistant message that only calls tools
    says nothing, whichever way it is sent). Content that is not text (an image part, a
    number) is compared as tagged data, never equal to any text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ("data", _data(content))
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            return ("data", _data(content))
    return texts[0] if len(texts) == 1 else ("parts", tuple(texts))


def _arguments(raw: Any) -> Any:
    """Arguments as the data they encode (spacing and key order are the client's business); text
    that is not JSON is compared as text."""
    if not isinstance(raw, str):
        return json.dumps(raw, sort_keys=True, default=str)
    try:
        return json.dumps(json.loads(raw), sort_keys=True)
    except ValueError:
        return ("text", raw)


def _first_difference(body: list[Any], committed: list[_Committed]) -> int | None:
    """The first message of `body` the model reads differently from the committed history. A
    message identical to the committed one as sent is read alike: its view is only worked out
    where the two differ (most of a request is history sent as stored, and the views were most of
    this check's cost)."""
    for k, m in enumerate(body):
        if k >= len(committed):
            return k
        if not committed[k].identical(m) and model_view(m) != committed[k].view:
            return k
    return None


_ENCODE = msgspec.json.Encoder(order="sorted").encode


class _Committed:
    """One committed message as sent, worked out once per case for every request compared with
    it: its model view, and its JSON (None: msgspec cannot write it, so only the view decides)."""

    __slots__ = ("json", "message", "view")

    def __init__(self, message: Any) -> None:
        self.message = message
        self.view = model_view(message)
        self.json = _json(message)

    def identical(self, m: Any) -> bool:
        """Equal, and equal as JSON: Python's == takes True, 1 and 1.0 for one another, which the
        model's view tells apart."""
        return self.json is not None and m == self.message and _json(m) == self.json


def _json(m: Any) -> bytes | None:
    try:
        return _ENCODE(m)
    except TypeError:
        return None


def _at(items: list[Any], k: int) -> Any:
    return items[k] if k < len(items) else None


def _describe(m: Any) -> str:
    if m is None:
        return "no message there"
    if not isinstance(m, dict):
        return f"a malformed message {short(m, 40)!r}"
    role = m.get("role")
    if role == Role.TOOL:
        return f"a tool result for {m.get('tool_call_id')} ({short(m.get('content'), 40)!r})"
    calls = m.get("tool_calls") or []
    if calls:
        ids = ", ".join(str(c.get("id")) for c in calls if isinstance(c, dict))
        return f"an assistant message calling {ids}"
    return f"a {role} message {short(m.get('content'), 40)!r}"
