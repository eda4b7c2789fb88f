"""A Messages API answer as the server-sent events of a streamed message, in the API's order."""

from __future__ import annotations

import json
from typing import Any


def _block_events(index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
    # Each block's text or input goes out as one delta: a client must handle any split.
    if block["type"] == "text":
        start = block | {"text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        start = block | {"input": {}}
        delta = {"type": "input_json_delta",
                 "partial_json": json.dumps(block["input"], ensure_ascii=False)}
    return [{"type": "content_block_start", "index": index, "content_block": start},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index}]


def stream_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """message_start (the message with no content yet), each block's start, delta and stop,
    message_delta (the stop reason and output tokens), message_stop."""
    usage = body["usage"]
    started = body | {"content": [], "stop_reason": None, "stop_sequence": None,
                      "usage": usage | {"output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": started}]
    for i, block in enumerate(body["content"]):
        events += _block_events(i, block)
    events += [{"type": "message_delta",
                "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]}},
               {"type": "message_stop"}]
    return events
