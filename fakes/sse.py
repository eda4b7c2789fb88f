"""Server-sent events framing, in each streaming API's own style: named events, or data-only chunks."""

from __future__ import annotations

import json
from typing import Any

from crashmatrix.fakes.chat_stream import CHUNK


def encode(events: list[dict[str, Any]]) -> bytes:
    if events and events[0].get("object") == CHUNK:
        # Chat Completions names no event: each chunk is a `data:` line alone, and the stream
        # ends with `data: [DONE]` (the OpenAI SDKs stop reading there).
        return b"".join(f"data: {json.dumps(e, ensure_ascii=False)}\n\n".encode()
                        for e in events) + b"data: [DONE]\n\n"
    # The Responses and Messages APIs name each event by its `type` field and send its JSON as
    # one line.
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n".encode()
        for e in events)
