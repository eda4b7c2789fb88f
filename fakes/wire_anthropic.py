"""The Anthropic Messages wire (`/v1/messages`): content blocks to the canonical view and back."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from crashmatrix.fakes import anthropic_errors
from crashmatrix.fakes.anthropic_stream import stream_events
from crashmatrix.fakes.api_errors import ApiError
from crashmatrix.fakes.conversation import text_of
from crashmatrix.fakes.response_store import ResponseStore
from crashmatrix.fakes.wire import Canonical, Refusal, Rendered, WireErrors
from crashmatrix.fakes.wire_chat import model_of

ANTHROPIC_ERRORS = WireErrors(
    invalid_json=anthropic_errors.invalid_json,
    server_error=anthropic_errors.server_error,
    rate_limited=anthropic_errors.rate_limited,
    script_gap=anthropic_errors.script_gap,
    unknown_case=anthropic_errors.unknown_case,
)


def _tool_names(tools: Any) -> list[str]:
    return [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)
            ] if isinstance(tools, list) else []


def _blocks(content: Any) -> list[dict[str, Any]]:
    # A string content is one text block (the API reads it so).
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _shape_error(payload: Any) -> ApiError | None:
    """The first shape error, worded as the API words its validation errors (`field: why`)."""
    if not isinstance(payload, dict):
        return anthropic_errors.invalid_request("body: Input should be a valid dictionary")
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return anthropic_errors.invalid_request("messages: Field required")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            return anthropic_errors.invalid_request(
                f"messages.{i}.role: Input should be 'user' or 'assistant'")
        content = m.get("content")
        if not isinstance(content, str | list):
            return anthropic_errors.invalid_request(f"messages.{i}.content: Field required")
        for j, block in enumerate(_blocks(content)):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                return anthropic_errors.invalid_request(
                    f"messages.{i}.content.{j}: Input should be a valid content block")
            kind = block["type"]
            if kind == "tool_use" and not (isinstance(block.get("id"), str)
                                           and isinstance(block.get("name"), str)):
                return anthropic_errors.invalid_request(
                    f"messages.{i}.content.{j}.tool_use.id: Field required")
            if kind == "tool_result" and not isinstance(block.get("tool_use_id"), str):
                return anthropic_errors.invalid_request(
                    f"messages.{i}.content.{j}.tool_result.tool_use_id: Field required")
    return None


def _ids(message: dict[str, Any], kind: str, key: str) -> list[tuple[int, str]]:
    return [(j, b[key]) for j, b in enumerate(_blocks(message["content"]))
            if b["type"] == kind]


def check_pairing(messages: list[dict[str, Any]]) -> ApiError | None:
    """The Messages API's rule: an assistant message's `tool_use` blocks are all answered by
    `tool_result` blocks in the very next message (a user message), and a `tool_result` answers
    a `tool_use` of the message right before it. Messages are read in order, so the first
    violation is reported; a second result for one call is an orphan."""
    for i, m in enumerate(messages):
        owed = {u for _, u in _ids(messages[i - 1], "tool_use", "id")} if i > 0 else set()
        for j, use_id in _ids(m, "tool_result", "tool_use_id"):
            if use_id not in owed:
                return anthropic_errors.orphan_tool_result(i, j, use_id)
            owed.discard(use_id)
        uses = [u for _, u in _ids(m, "tool_use", "id")]
        if uses:
            after = messages[i + 1] if i + 1 < len(messages) else None
            answered = ({u for _, u in _ids(after, "tool_result", "tool_use_id")}
                        if after is not None and after["role"] == "user" else set())
            missing = [u for u in uses if u not in answered]
            if missing:
                return anthropic_errors.missing_tool_results(i, missing)
    return None


def to_canonical(system: Any, messages: list[dict[str, Any]]) -> list[Any]:
    """Chat-Completions messages: `system` the system message; an assistant message's text
    blocks its content and its `tool_use` blocks its tool_calls (arguments as JSON text); a user
    message's `tool_result` blocks `tool` messages, then its other blocks one user message."""
    out: list[dict[str, Any]] = []
    if system is not None:
        out.append({"role": "system", "content": text_of(system)})
    for m in messages:
        blocks = _blocks(m["content"])
        if m["role"] == "assistant":
            texts = [b for b in blocks if b["type"] == "text"]
            message: dict[str, Any] = {"role": "assistant",
                                       "content": text_of(texts) if texts else None}
            calls = [{"id": b["id"], "type": "function",
                      "function": {"name": b["name"],
                                   "arguments": json.dumps(b.get("input", {}),
                                                           ensure_ascii=False)}}
                     for b in blocks if b["type"] == "tool_use"]
            if calls:
                message["tool_calls"] = calls
            out.append(message)
            continue
        results = [b for b in blocks if b["type"] == "tool_result"]
        out += [{"role": "tool", "tool_call_id": b["tool_use_id"],
                 "content": text_of(b.get("content"))} for b in results]
        rest = [b for b in blocks if b["type"] != "tool_result"]
        if rest or not results:
            out.append({"role": "user", "content": text_of(rest)})
    return out


def content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A canonical assistant message as content blocks: its text, then one `tool_use` each."""
    blocks: list[dict[str, Any]] = []
    if message.get("content") is not None:
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        blocks.append({"type": "tool_use", "id": call["id"], "name": fn["name"],
                       "input": json.loads(fn["arguments"])})
    return blocks


class AnthropicWire:
    name = "anthropic"
    suffix = "/v1/messages"
    errors = ANTHROPIC_ERRORS

    def parse(self, payload: Any, store: ResponseStore) -> Canonical | Refusal:
        shape = _shape_error(payload)
        if shape is not None:
            return Refusal(shape, [])
        tools = _tool_names(payload.get("tools"))
        messages = to_canonical(payload.get("system"), payload["messages"])
        pairing = check_pairing(payload["messages"])
        if pairing is not None:
            return Refusal(pairing, messages, tools, pairing=True)
        return Canonical(messages, tools, model_of(payload), payload.get("stream") is True,
                         {"messages": payload["messages"], "system": payload.get("system")})

    def call_id(self, k: int) -> str:
        # The Messages API's tool ids are `toolu_...`; k keeps them unique within a history.
        return f"toolu_{k}"

    def render(self, message: dict[str, Any], request: Canonical,
               store: ResponseStore) -> Rendered:
        history = json.dumps(request.context, sort_keys=True, ensure_ascii=False)
        digest = hashlib.sha256(history.encode()).hexdigest()[:24]
        content = content_blocks(message)
        body = {
            "id": f"msg_{digest}", "type": "message", "role": "assistant",
            "model": request.model, "content": content,
            "stop_reason": "tool_use" if message.get("tool_calls") else "end_turn",
            "stop_sequence": None,
            # Rough counts (4 characters a token), as on the other wires.
            "usage": {"input_tokens": len(history) // 4,
                      "output_tokens": len(json.dumps(content, ensure_ascii=False)) // 4,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }
        return Rendered(body, stream_events(body) if request.stream else None)


ANTHROPIC = AnthropicWire()
