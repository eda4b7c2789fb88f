"""A Responses API answer as the server-sent events of a streamed response, in the API's order."""

from __future__ import annotations

from typing import Any


def _pending(item: dict[str, Any]) -> dict[str, Any]:
    """The item as first announced: in progress, its text or arguments still empty."""
    if item["type"] == "message":
        return item | {"status": "in_progress", "content": []}
    return item | {"status": "in_progress", "arguments": ""}


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    # Each piece of text or arguments goes out as one delta: a client must handle any split,
    # and one delta keeps the stream a plain function of the answer.
    at = {"item_id": item["id"], "output_index": index}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": index, "item": _pending(item)}]
    if item["type"] == "message":
        part = item["content"][0]
        text = part["text"]
        events += [
            {"type": "response.content_part.added", **at, "content_index": 0,
             "part": part | {"text": ""}},
            {"type": "response.output_text.delta", **at, "content_index": 0, "delta": text,
             "logprobs": []},
            {"type": "response.output_text.done", **at, "content_index": 0, "text": text,
             "logprobs": []},
            {"type": "response.content_part.done", **at, "content_index": 0, "part": part},
        ]
    else:
        events += [
            {"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]},
            {"type": "response.function_call_arguments.done", **at, "name": item["name"],
             "arguments": item["arguments"]},
        ]
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def stream_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """response.created, response.in_progress, each output item's events, response.completed;
    every event numbered by `sequence_number` from 0, as the API numbers them."""
    started = body | {"status": "in_progress", "completed_at": None, "output": [],
                      "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started},
                                    {"type": "response.in_progress", "response": started}]
    for i, item in enumerate(body["output"]):
        events += _item_events(i, item)
    events.append({"type": "response.completed", "response": body})
    return [e | {"sequence_number": n} for n, e in enumerate(events)]
