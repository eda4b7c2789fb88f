"""Replies from a scenario's script: a pure function of the request's messages, never a counter."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from crashmatrix.fakes.conversation import Conversation, holds
from crashmatrix.scenarios import template
from crashmatrix.scenarios.errors import ScenarioError
from crashmatrix.scenarios.model import CallIds, Reply, ResultKey, Rule, Scenario

# A fixed timestamp keeps whole responses, not just messages, identical for identical histories.
CREATED = 1_700_000_000


def match_rule(scenario: Scenario, conv: Conversation) -> Rule | None:
    """The first rule whose condition holds (first match wins)."""
    for rule in scenario.script:
        if holds(rule.when, conv):
            return rule
    return None


def _parse_key(text: str) -> ResultKey:
    tool, sep, path = text.partition(":")
    try:
        return ResultKey(tool, str(PurePosixPath(path)) if sep else None)
    except ValueError:
        # The schema validated every placeholder; reaching here is a bug, say so plainly.
        raise ScenarioError(f"bad result key {text!r} in a template") from None


def _render(text: str, conv: Conversation) -> str:
    def lookup(key: str) -> str | None:
        r = conv.latest(_parse_key(key))
        return None if r is None else r.content

    return template.render(text, lookup)


def chat_call_id(k: int) -> str:
    return f"call_{k}"


def reply_message(reply: Reply, conv: Conversation, call_ids: CallIds = CallIds.HISTORY,
                  call_id: Callable[[int], str] = chat_call_id, issued: int = 0) -> dict[str, Any]:
    """The assistant message. Call ids are `call_<k>` (or the wire's format for k): with HISTORY,
    k counts the calls already in the history (unique within a history); with PER_RESPONSE, k
    counts from 0 in every reply (ids repeat across turns); either way they are identical when
    the history repeats. With FRESH, k counts the calls this case's fake has answered before
    (`issued`), as a real service gives a new id in every response: a history asked again after
    a crash gets new ids."""
    first = {CallIds.HISTORY: conv.tool_calls_so_far, CallIds.FRESH: issued}.get(call_ids, 0)
    text = None if reply.text is None else _render(reply.text, conv)
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call_id(first + i),
                "type": "function",
                "function": {
                    "name": call.tool,
                    "arguments": json.dumps(dict(call.args), ensure_ascii=False),
                },
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    return message


def completion(message: dict[str, Any], messages: list[Any], model: str) -> dict[str, Any]:
    """A `chat.completion` body around the message; its id is a hash of the history."""
    history = json.dumps(messages, sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(history.encode()).hexdigest()[:24]
    # Rough token counts (4 characters a token) so clients that read `usage` find numbers.
    prompt_tokens = len(history) // 4
    completion_tokens = len(json.dumps(message, ensure_ascii=False)) // 4
    return {
        "id": f"chatcmpl-{digest}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
