"""The fake's Chat Completions wire streams on `"stream": true`, as the real service does.

The `openai` client talks to a served fake: a streamed answer must carry exactly what the plain
one does (text, tool calls, ids, finish reason), and the case's record must not tell them apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from openai import DefaultHttpxClient, OpenAI
from openai.types.chat import ChatCompletionChunk

from crashmatrix.fakes import FakeProvider
from crashmatrix.fakes.chat_stream import stream_chunks
from crashmatrix.scenarios import load_builtin
from tests.support import http

LINE = "修复登录超时"
UNKNOWN = "ERROR: the run was interrupted. The external outcome is unknown."
TOOLS: list[Any] = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
                    for n in ("read", "append_note", "bash")]
TASK = "Append the line '修复登录超时' to CHANGELOG.md, then run the tests and report the result."


def call(call_id: str, name: str, **args: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


def assistant(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def tool(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


START: list[Any] = [{"role": "system", "content": "Be careful."}, {"role": "user", "content": TASK}]
APPEND = call("call_0", "append_note", path="CHANGELOG.md", line=LINE)
# One history per kind of reply of changelog-fast: tool calls only, text and a tool call, and
# text only (the final report).
HISTORIES: dict[str, list[Any]] = {
    "tool-calls-only": START,
    "text-and-tool-call": [*START, assistant(APPEND), tool("call_0", UNKNOWN)],
    "text-only": [*START, assistant(APPEND), tool("call_0", "appended 1 line to CHANGELOG.md"),
                  assistant(call("call_1", "bash", command="echo 1 passed")),
                  tool("call_1", "exit 0\n1 passed")],
}


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


@pytest.fixture
def client() -> Iterator[DefaultHttpxClient]:
    # No proxy from the environment: the fake is on 127.0.0.1 and nothing else is reached.
    with DefaultHttpxClient(trust_env=False, timeout=10.0) as c:
        yield c


def openai_client(provider: FakeProvider, key: str, http_client: DefaultHttpxClient) -> OpenAI:
    provider.register(key, load_builtin()["changelog-fast"])
    return OpenAI(api_key="x", base_url=provider.base_url(key), http_client=http_client,
                  max_retries=0)


def reassembled(chunks: list[ChatCompletionChunk]) -> dict[str, Any]:
    """The message as a client rebuilds it from the deltas: text appended, tool calls by index
    (id, type and name from the first delta of each, arguments appended)."""
    content: str | None = None
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content is not None:
                content = (content or "") + delta.content
            for part in delta.tool_calls or []:
                got = calls.setdefault(part.index, {"function": {"arguments": ""}})
                if part.id is not None:
                    got["id"] = part.id
                if part.type is not None:
                    got["type"] = part.type
                if part.function is not None:
                    if part.function.name is not None:
                        got["function"]["name"] = part.function.name
                    got["function"]["arguments"] += part.function.arguments or ""
    return {"content": content, "tool_calls": [calls[i] for i in sorted(calls)]}


def plain_message(completion: Any) -> dict[str, Any]:
    message = completion.choices[0].message
    return {"content": message.content,
            "tool_calls": [{"id": c.id, "type": c.type,
                            "function": {"name": c.function.name, "arguments": c.function.arguments}}
                           for c in message.tool_calls or []]}


@pytest.mark.parametrize("history", list(HISTORIES))
def test_the_openai_client_streams_the_same_message_as_it_gets_plain(
        provider: FakeProvider, client: DefaultHttpxClient, history: str) -> None:
    messages = HISTORIES[history]
    sdk = openai_client(provider, "c", client)
    plain = sdk.chat.completions.create(model="gpt-x", messages=messages, tools=TOOLS)
    chunks = list(sdk.chat.completions.create(model="gpt-x", messages=messages, tools=TOOLS,
                                              stream=True))
    # Before the fix the stream was a plain JSON body: the client yielded no chunk at all.
    assert chunks, "the client got no chunk from a streamed request"
    assert reassembled(chunks) == plain_message(plain)
    assert {c.id for c in chunks} == {plain.id}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == \
        plain.choices[0].finish_reason
    first = chunks[0].choices[0].delta
    assert first.role == "assistant"


def test_the_streamed_and_plain_requests_are_recorded_alike(
        provider: FakeProvider, client: DefaultHttpxClient) -> None:
    streamed = openai_client(provider, "streamed", client)
    plain = openai_client(provider, "plain", client)
    for messages in HISTORIES.values():
        list(streamed.chat.completions.create(model="gpt-x", messages=messages, tools=TOOLS,
                                              stream=True))
        plain.chat.completions.create(model="gpt-x", messages=messages, tools=TOOLS)
    records = provider.requests("streamed")
    assert [r.rule for r in records] == ["start", "check-after-unknown-append", "report"]
    assert [r.to_json() for r in records] == [r.to_json() for r in provider.requests("plain")]


def test_the_clients_stream_helper_rebuilds_the_plain_completion(
        provider: FakeProvider, client: DefaultHttpxClient) -> None:
    # The SDK's own accumulator (what `chat.completions.stream` users, such as the Agents SDK's
    # chat model, rely on) must end with the very completion a plain request gets.
    sdk = openai_client(provider, "c", client)
    messages = HISTORIES["text-and-tool-call"]
    plain = sdk.chat.completions.create(model="gpt-x", messages=messages, tools=TOOLS)
    with sdk.chat.completions.stream(model="gpt-x", messages=messages, tools=TOOLS) as stream:
        final = stream.get_final_completion()
    assert final.id == plain.id
    assert final.choices[0].finish_reason == plain.choices[0].finish_reason == "tool_calls"
    assert plain_message(final) == plain_message(plain)


def test_include_usage_adds_a_last_chunk_with_the_usage_and_no_choices(
        provider: FakeProvider, client: DefaultHttpxClient) -> None:
    sdk = openai_client(provider, "c", client)
    messages = HISTORIES["text-and-tool-call"]
    plain = sdk.chat.completions.create(model="gpt-x", messages=messages, tools=TOOLS)
    chunks = list(sdk.chat.completions.create(model="gpt-x", messages=messages, tools=TOOLS,
                                              stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == []
    assert chunks[-1].usage == plain.usage
    assert all(c.usage is None for c in chunks[:-1])
    without = list(sdk.chat.completions.create(model="gpt-x", messages=messages, tools=TOOLS,
                                               stream=True))
    assert all(c.usage is None and c.choices for c in without)


def sse_data(data: bytes) -> list[str]:
    """The `data:` payloads of a server-sent event stream, in order; no block names an event."""
    out = []
    for block in data.decode().split("\n\n"):
        if block.strip():
            assert block.startswith("data: "), block
            assert "\n" not in block, block
            out.append(block.removeprefix("data: "))
    return out


def test_the_wire_sends_data_only_chunks_in_the_apis_order_then_done(
        provider: FakeProvider) -> None:
    url = provider.register("c", load_builtin()["changelog-fast"]) + "/chat/completions"
    request = {"model": "gpt-x", "messages": HISTORIES["text-and-tool-call"], "tools": TOOLS}
    _, _, plain_data = http.post(url, request)
    plain = json.loads(plain_data)
    status, ctype, data = http.post(url, {**request, "stream": True})
    assert (status, ctype) == (200, "text/event-stream; charset=utf-8")
    payloads = sse_data(data)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks == stream_chunks(plain)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    message = plain["choices"][0]["message"]
    assert deltas == [
        {"role": "assistant", "content": "", "refusal": None},
        {"content": message["content"]},
        {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                         "function": {"name": "read", "arguments": ""}}]},
        {"tool_calls": [{"index": 0,
                         "function": {"arguments": message["tool_calls"][0]["function"]["arguments"]}}]},
        {},
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 4 + ["tool_calls"]


def test_a_fault_on_a_streamed_request_is_a_plain_json_error(provider: FakeProvider) -> None:
    # As on the other wires, an error comes before any event, in the wire's JSON shape.
    url = provider.register("c", load_builtin()["retry"]) + "/chat/completions"
    status, ctype, data = http.post(url, {"model": "m", "messages": START, "stream": True})
    assert status == 500, data
    assert ctype == "application/json"
    assert "error" in json.loads(data)
