"""The OpenAI Chat Completions wire: its requests are already the canonical view."""

from __future__ import annotations

from typing import Any

from crashmatrix.fakes import api_errors
from crashmatrix.fakes.chat_stream import stream_chunks
from crashmatrix.fakes.pairing import check_pairing
from crashmatrix.fakes.response_store import ResponseStore
from crashmatrix.fakes.script import chat_call_id, completion
from crashmatrix.fakes.wire import Canonical, Refusal, Rendered, WireErrors

DEFAULT_MODEL = "crashmatrix-fake"

OPENAI_ERRORS = WireErrors(
    invalid_json=api_errors.invalid_json,
    server_error=api_errors.server_error,
    rate_limited=api_errors.rate_limited,
    script_gap=api_errors.script_gap,
    unknown_case=api_errors.unknown_case,
)


def model_of(payload: dict[str, Any]) -> str:
    model = payload.get("model")
    return model if isinstance(model, str) else DEFAULT_MODEL


def _tool_names(tools: Any) -> list[str]:
    names: list[str] = []
    for t in tools if isinstance(tools, list) else []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


def _shape_error(payload: Any) -> api_errors.ApiError | None:
    if not isinstance(payload, dict):
        return api_errors.invalid_messages("The request body must be a JSON object.", "body")
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return api_errors.invalid_messages("'messages' is a required property")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return api_errors.invalid_messages(
                f"Invalid value for 'messages[{i}]': expected an object with a 'role'.",
                f"messages.[{i}].role")
    return None


class ChatWire:
    name = "chat"
    suffix = "/v1/chat/completions"
    errors = OPENAI_ERRORS

    def parse(self, payload: Any, store: ResponseStore) -> Canonical | Refusal:
        shape = _shape_error(payload)
        if shape is not None:
            raw = payload.get("messages") if isinstance(payload, dict) else None
            return Refusal(shape, raw if isinstance(raw, list) else [])
        messages: list[Any] = payload["messages"]
        tools = _tool_names(payload.get("tools"))
        pairing = check_pairing(messages)
        if pairing is not None:
            return Refusal(pairing, messages, tools, pairing=True)
        # Recorded exactly as received: this wire's requests are the canonical view itself.
        # Streamed or not, the record is the same: only the answer's framing differs.
        options = payload.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        return Canonical(messages, tools, model_of(payload), payload.get("stream") is True,
                         {"include_usage": usage})

    def call_id(self, k: int) -> str:
        return chat_call_id(k)

    def render(self, message: dict[str, Any], request: Canonical,
               store: ResponseStore) -> Rendered:
        body = completion(message, request.messages, request.model)
        return Rendered(body, stream_chunks(body, request.context.get("include_usage") is True)
                        if request.stream else None)


CHAT = ChatWire()
