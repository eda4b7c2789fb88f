"""A Chat Completions answer as the `chat.completion.chunk` objects of a streamed completion."""

from __future__ import annotations

from typing import Any

CHUNK = "chat.completion.chunk"


def _chunk(body: dict[str, Any], delta: dict[str, Any], finish_reason: str | None = None,
           ) -> dict[str, Any]:
    return {"id": body["id"], "object": CHUNK, "created": body["created"], "model": body["model"],
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish_reason}]}


def stream_chunks(body: dict[str, Any], include_usage: bool = False) -> list[dict[str, Any]]:
    """The chunks that carry the `chat.completion` `body`, in the API's order: the role (with an
    empty content when text follows, null when only tool calls do), the text, each tool call's
    index, id, type and name and then its arguments, an empty delta with the finish reason, and
    with `include_usage` a last chunk with no choices and the usage (every other chunk then has
    `"usage": null`, as the API sends it)."""
    choice = body["choices"][0]
    message = choice["message"]
    text = message.get("content")
    # Each piece of text or arguments goes out as one delta, as on the other wires: a client
    # must handle any split, and one delta keeps the stream a plain function of the answer.
    chunks = [_chunk(body, {"role": "assistant", "content": None if text is None else "",
                            "refusal": None})]
    if text:
        chunks.append(_chunk(body, {"content": text}))
    for i, call in enumerate(message.get("tool_calls") or []):
        fn = call["function"]
        chunks += [
            _chunk(body, {"tool_calls": [{"index": i, "id": call["id"], "type": call["type"],
                                          "function": {"name": fn["name"], "arguments": ""}}]}),
            _chunk(body, {"tool_calls": [{"index": i, "function": {"arguments": fn["arguments"]}}]}),
        ]
    chunks.append(_chunk(body, {}, choice["finish_reason"]))
    if not include_usage:
        return chunks
    last = {key: value for key, value in chunks[0].items() if key != "choices"}
    return [c | {"usage": None} for c in chunks] + [last | {"choices": [], "usage": body["usage"]}]
