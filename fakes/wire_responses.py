"""The OpenAI Responses wire (`/v1/responses`): input items to the canonical view and back."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from crashmatrix.fakes import api_errors
from crashmatrix.fakes.conversation import text_of
from crashmatrix.fakes.response_store import ResponseStore
from crashmatrix.fakes.responses_stream import stream_events
from crashmatrix.fakes.script import CREATED, chat_call_id
from crashmatrix.fakes.wire import Canonical, Refusal, Rendered
from crashmatrix.fakes.wire_chat import OPENAI_ERRORS, model_of

MESSAGE_ROLES = ("user", "assistant", "system", "developer")
# Reasoning items carry nothing the script reads (the fake never emits one): skipped.
ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning")
# The fields each item type must have, as strings (a message's content is checked apart).
_REQUIRED = {"function_call": ("call_id", "name", "arguments"),
             "function_call_output": ("call_id",)}


def _tool_names(tools: Any) -> list[str]:
    # Responses tools are flat: {"type": "function", "name": ..., "parameters": ...}.
    return [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)
            ] if isinstance(tools, list) else []


def _item_error(i: int, item: Any) -> api_errors.ApiError | None:
    """The first shape error of input item `i`, worded as the API words its checks."""
    where = f"input[{i}]"
    if not isinstance(item, dict):
        return api_errors.invalid_value(where, "expected an object.")
    kind = item.get("type", "message")  # an "easy" message item may leave out its type
    if kind not in ITEM_TYPES:
        return api_errors.invalid_value(f"{where}.type", f"{kind!r} is not one of "
                                        f"{', '.join(repr(t) for t in ITEM_TYPES)}.")
    if kind == "message":
        if item.get("role") not in MESSAGE_ROLES:
            return api_errors.invalid_value(f"{where}.role", "expected one of "
                                            f"{', '.join(repr(r) for r in MESSAGE_ROLES)}.")
        if not isinstance(item.get("content"), str | list):
            return api_errors.missing_parameter(f"{where}.content")
    for key in _REQUIRED.get(kind, ()):
        if not isinstance(item.get(key), str):
            return api_errors.missing_parameter(f"{where}.{key}")
    if kind == "function_call_output" and not isinstance(item.get("output"), str | list):
        return api_errors.missing_parameter(f"{where}.output")
    return None


def check_pairing(items: list[dict[str, Any]]) -> api_errors.ApiError | None:
    """The Responses API's pairing rule over the whole (expanded) input: every function_call
    has a function_call_output with its call_id somewhere after it, and every output answers an
    earlier call. Unlike Chat Completions, other items may sit between a call and its output.
    A second output for an answered call is refused as an orphan too (the fake's choice: it
    breaks the exactly-one-result promise the harness checks)."""
    pending: list[str] = []
    answered: set[str] = set()
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call":
            pending.append(item["call_id"])
        elif kind == "function_call_output":
            call_id = item["call_id"]
            if call_id not in pending or call_id in answered:
                return api_errors.no_tool_call(call_id)
            answered.add(call_id)
    missing = [c for c in pending if c not in answered]
    return api_errors.no_tool_output(missing[0]) if missing else None


def to_canonical(instructions: Any, items: list[dict[str, Any]]) -> list[Any]:
    """Chat-Completions messages for the items: `instructions` becomes the system message, an
    assistant message and the function calls right after it one assistant message (one model
    turn, as the script counts turns), each function_call_output a `tool` message."""
    messages: list[dict[str, Any]] = []
    if instructions is not None:
        messages.append({"role": "system", "content": text_of(instructions)})
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item["role"], "content": text_of(item["content"])})
        elif kind == "function_call":
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item["call_id"],
                             "content": text_of(item["output"])})
    return messages


def output_items(message: dict[str, Any], digest: str) -> list[dict[str, Any]]:
    """The response's output items for a canonical assistant message: its text as a message
    item, then one function_call item per tool call. Item ids derive from the response's."""
    out: list[dict[str, Any]] = []
    if message.get("content") is not None:
        out.append({"id": f"msg_{digest}", "type": "message", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": message["content"],
                                 "annotations": [], "logprobs": []}]})
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        out.append({"id": f"fc_{digest}_{i}", "type": "function_call", "status": "completed",
                    "call_id": call["id"], "name": fn["name"], "arguments": fn["arguments"]})
    return out


def _usage(history: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    # Rough counts (4 characters a token), as on the chat wire.
    inp, out = len(history) // 4, len(json.dumps(output, ensure_ascii=False)) // 4
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": inp + out}


class ResponsesWire:
    name = "responses"
    suffix = "/v1/responses"
    errors = OPENAI_ERRORS

    def parse(self, payload: Any, store: ResponseStore) -> Canonical | Refusal:
        if not isinstance(payload, dict):
            return Refusal(api_errors.invalid_messages("The request body must be a JSON object.",
                                                       "body"), [])
        tools = _tool_names(payload.get("tools"))
        if payload.get("conversation") is not None:
            return Refusal(api_errors.unsupported_parameter(
                "conversation", "send the history in 'input' or use 'previous_response_id'."),
                [], tools)
        raw = payload.get("input", [])
        new = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
        if not isinstance(new, list):
            return Refusal(api_errors.invalid_value("input", "expected a string or an array."),
                           [], tools)
        instructions = payload.get("instructions")
        for i, item in enumerate(new):
            shape = _item_error(i, item)
            if shape is not None:
                return Refusal(shape, [], tools)
        previous = payload.get("previous_response_id")
        items = list(new)
        if previous is not None:
            # The stored response's items come first; its instructions are not carried over
            # (the API documents that), so only this request's instructions are the system.
            before = store.get(previous) if isinstance(previous, str) else None
            if before is None:
                return Refusal(api_errors.previous_response_not_found(str(previous)), [], tools)
            items = before + items
        messages = to_canonical(instructions, items)
        pairing = check_pairing(items)
        if pairing is not None:
            return Refusal(pairing, messages, tools, pairing=True)
        context = {"items": items, "instructions": instructions, "previous": previous,
                   "store": payload.get("store") is not False,
                   "tools": payload.get("tools") if isinstance(payload.get("tools"), list) else []}
        return Canonical(messages, tools, model_of(payload), payload.get("stream") is True,
                         context)

    def call_id(self, k: int) -> str:
        return chat_call_id(k)  # the Responses API's call ids are `call_...` too

    def render(self, message: dict[str, Any], request: Canonical,
               store: ResponseStore) -> Rendered:
        ctx = request.context
        history = json.dumps({"instructions": ctx["instructions"], "input": ctx["items"]},
                             sort_keys=True, ensure_ascii=False)
        digest = hashlib.sha256(history.encode()).hexdigest()[:32]
        output = output_items(message, digest)
        response_id = f"resp_{digest}"
        if ctx["store"]:
            # Stored as the API stores it (`store` defaults to true), so a later request can
            # continue from it with previous_response_id.
            store.put(response_id, ctx["items"] + output)
        body = {
            "id": response_id, "object": "response", "created_at": CREATED,
            "status": "completed", "completed_at": CREATED, "error": None,
            "incomplete_details": None, "instructions": ctx["instructions"],
            "max_output_tokens": None, "model": request.model, "output": output,
            "parallel_tool_calls": True, "previous_response_id": ctx["previous"],
            "reasoning": {"effort": None, "summary": None}, "store": ctx["store"],
            "temperature": 1.0, "text": {"format": {"type": "text"}}, "tool_choice": "auto",
            "tools": ctx["tools"], "top_p": 1.0, "truncation": "disabled",
            "usage": _usage(history, output), "user": None, "metadata": {},
        }
        return Rendered(body, stream_events(body) if request.stream else None)


RESPONSES = ResponsesWire()
