"""Server-sent events framing: one `event:` and `data:` pair per event, named by its `type`."""

from __future__ import annotations

import json
from typing import Any


def encode(events: list[dict[str, Any]]) -> bytes:
    # Both streaming APIs name each event by its `type` field and send its JSON as one line.
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e, ensure_ascii=False)}\n\n".encode()
        for e in events)
