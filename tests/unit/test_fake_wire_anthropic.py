"""The fake's Anthropic Messages wire: translation both ways, the API's pairing 400s, ids, streams."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.fakes import FakeProvider
from crashmatrix.fakes.response_store import ResponseStore
from crashmatrix.fakes.wire import Refusal
from crashmatrix.fakes.wire_anthropic import ANTHROPIC, check_pairing, content_blocks, to_canonical
from crashmatrix.scenarios import load_builtin, load_file
from tests.support import http

LINE = "修复登录超时"
UNKNOWN = "ERROR: the run was interrupted. The external outcome is unknown."
TOOLS = [{"name": n, "input_schema": {"type": "object"}} for n in ("read", "append_note", "bash")]


def post(url: str, body: Any, timeout: float = 5.0) -> tuple[int, str, bytes]:
    """As Anthropic's clients send it: with their version header."""
    return http.post(url, body, timeout, {"anthropic-version": "2023-06-01"})


def post_json(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    status, _, data = post(url, body)
    return status, json.loads(data)


def use(use_id: str, name: str, **args: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": args}


def result(use_id: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": use_id, "content": content}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": blocks[0] if len(blocks) == 1 and isinstance(
        blocks[0], str) else list(blocks)}


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 1024, "system": "Be careful.",
            "messages": list(messages), "tools": TOOLS, **extra}


def uses(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [(b["id"], b["name"]) for b in message["content"] if b["type"] == "tool_use"]


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


@pytest.fixture
def url(provider: FakeProvider) -> str:
    provider.register("c", load_builtin()["changelog-fast"])
    # Anthropic's clients take the URL without /v1 and add /v1/messages themselves.
    return provider.root_url("c") + "/v1/messages"


# -- request -> canonical ---------------------------------------------------------------------

def test_blocks_become_chat_messages() -> None:
    messages = [
        user("go"),
        assistant({"type": "text", "text": "Checking first."},
                  use("toolu_0", "read", path="a"), use("toolu_1", "bash", command="true")),
        user(result("toolu_0", "text of a"),
             result("toolu_1", [{"type": "text", "text": "exit "}, {"type": "text", "text": "0"}]),
             {"type": "text", "text": "and then?"}),
        assistant({"type": "thinking", "thinking": "hm", "signature": "s"},
                  {"type": "text", "text": "Done."}),
    ]
    system = [{"type": "text", "text": "Be "}, {"type": "text", "text": "careful."}]
    assert to_canonical(system, messages) == [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Checking first.", "tool_calls": [
            {"id": "toolu_0", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a"}'}},
            {"id": "toolu_1", "type": "function",
             "function": {"name": "bash", "arguments": '{"command": "true"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_0", "content": "text of a"},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "exit 0"},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": "Done."},
    ]


def test_a_tool_only_assistant_message_has_no_text_content() -> None:
    (m,) = to_canonical(None, [assistant(use("toolu_0", "read", path=LINE))])
    assert m["content"] is None
    assert m["tool_calls"][0]["function"]["arguments"] == json.dumps({"path": LINE},
                                                                     ensure_ascii=False)


# -- decision -> response ---------------------------------------------------------------------

def test_a_reply_becomes_a_text_block_then_tool_use_blocks() -> None:
    message = {"role": "assistant", "content": "Checking.", "refusal": None, "tool_calls": [
        {"id": "toolu_3", "type": "function",
         "function": {"name": "read", "arguments": '{"path": "a"}'}}]}
    assert content_blocks(message) == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_3", "name": "read", "input": {"path": "a"}}]


def test_a_message_over_http_has_the_apis_shape_and_is_recorded_canonically(
        provider: FakeProvider, url: str) -> None:
    status, ctype, data = post(url, body(user("Append the line.")))
    assert (status, ctype) == (200, "application/json")
    got = json.loads(data)
    assert (got["type"], got["role"], got["model"]) == ("message", "assistant", "claude-x")
    assert got["id"].startswith("msg_")
    assert (got["stop_reason"], got["stop_sequence"]) == ("tool_use", None)
    assert got["content"] == [{"type": "tool_use", "id": "toolu_0", "name": "append_note",
                               "input": {"path": "CHANGELOG.md", "line": LINE}}]
    assert set(got["usage"]) >= {"input_tokens", "output_tokens"}
    (rec,) = provider.requests("c")
    assert (rec.wire, rec.status, rec.rule) == ("anthropic", 200, "start")
    assert rec.tools == ["read", "append_note", "bash"]
    assert rec.messages == [{"role": "system", "content": "Be careful."},
                            {"role": "user", "content": "Append the line."}]
    # The reply is recorded canonically, with the ids the wire sent.
    assert rec.reply is not None
    assert rec.reply["tool_calls"][0]["id"] == "toolu_0"


def test_the_whole_script_runs_and_tool_ids_stay_unique(url: str,
                                                        provider: FakeProvider) -> None:
    messages: list[dict[str, Any]] = [user("Append the line.")]
    results = iter([UNKNOWN, f"# Changelog\n\n{LINE}\n", "exit code 0\n1 passed"])
    seen: list[str] = []
    for _ in range(6):
        status, got = post_json(url, body(*messages))
        assert status == 200, got
        messages.append({"role": "assistant", "content": got["content"]})
        new = uses(got)
        if not new:
            break
        seen += [i for i, _ in new]
        messages.append(user(*(result(i, next(results)) for i, _ in new)))
    assert [r.rule for r in provider.requests("c")] == [
        "start", "check-after-unknown-append", "run-tests", "report"]
    assert got["stop_reason"] == "end_turn"
    assert got["content"] == [{"type": "text",
                               "text": f"Added '{LINE}' to CHANGELOG.md. Tests: 1 passed"}]
    assert seen == ["toolu_0", "toolu_1", "toolu_2"]


# -- pairing ----------------------------------------------------------------------------------

def test_a_tool_use_without_its_result_is_the_apis_400(url: str, provider: FakeProvider) -> None:
    status, err = post_json(url, body(
        user("go"), assistant(use("toolu_0", "read", path="a"), use("toolu_1", "bash", command="x")),
        user(result("toolu_1", "ok"))))
    assert (status, err) == (400, {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "messages.1: `tool_use` ids were found without `tool_result` blocks "
                   "immediately after: toolu_0. Each `tool_use` block must have a corresponding "
                   "`tool_result` block in the next message."}})
    (rec,) = provider.requests("c")
    assert (rec.wire, rec.status, rec.error) == ("anthropic", 400, err)
    # The harness reads the error's type where it reads the OpenAI shape's: body.error.type.
    assert rec.error is not None
    assert rec.error["error"]["type"] == "invalid_request_error"


def test_a_tool_result_without_its_use_is_the_apis_400(url: str) -> None:
    status, err = post_json(url, body(
        user("go"), assistant(use("toolu_0", "read", path="a")),
        user(result("toolu_0", "x"), result("toolu_7", "y"))))
    assert (status, err) == (400, {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` "
                   "blocks: toolu_7. Each `tool_result` block must have a corresponding "
                   "`tool_use` block in the previous message."}})


@pytest.mark.parametrize(("messages", "says"), [
    # The results must be in the very next message, not a later one.
    ([assistant(use("toolu_0", "read", path="a")), user("wait"), user(result("toolu_0", "x"))],
     "messages.0: `tool_use` ids were found without"),
    # A tool_use at the end of the list is unanswered too.
    ([user("go"), assistant(use("toolu_0", "read", path="a"))],
     "messages.1: `tool_use` ids were found without"),
    # A second result for one call is an orphan.
    ([assistant(use("toolu_0", "read", path="a")),
      user(result("toolu_0", "x"), result("toolu_0", "x"))],
     "messages.1.content.1: unexpected `tool_use_id`"),
    ([user(result("toolu_0", "x"))], "messages.0.content.0: unexpected `tool_use_id`"),
])
def test_pairing_violations(messages: list[dict[str, Any]], says: str) -> None:
    err = check_pairing(messages)
    assert err is not None
    assert err.status == 400
    assert err.message.startswith(says)


@pytest.mark.parametrize(("payload", "says"), [
    ({"model": "m"}, "messages: Field required"),
    ({"messages": [{"role": "tool", "content": "x"}]},
     "messages.0.role: Input should be 'user' or 'assistant'"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
     "messages.0.content.0.tool_result.tool_use_id: Field required"),
])
def test_malformed_requests_are_refused_in_the_apis_shape(payload: Any, says: str) -> None:
    got = ANTHROPIC.parse(payload, ResponseStore())
    assert isinstance(got, Refusal)
    assert got.error.body == {"type": "error",
                              "error": {"type": "invalid_request_error", "message": says}}


# -- streaming --------------------------------------------------------------------------------

def sse_events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in data.decode().split("\n\n"):
        if block.strip():
            fields = dict(line.split(": ", 1) for line in block.split("\n"))
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def test_a_streamed_message_sends_the_apis_events_and_adds_up_to_the_same_message(
        url: str) -> None:
    request = body(user("go"), assistant(use("toolu_0", "append_note", path="CHANGELOG.md",
                                             line=LINE)),
                   user(result("toolu_0", UNKNOWN)))
    _, plain = post_json(url, request)
    status, ctype, data = post(url, {**request, "stream": True})
    assert (status, ctype) == (200, "text/event-stream; charset=utf-8")
    events = sse_events(data)
    assert [n for n, _ in events] == [
        "message_start",
        "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]
    assert all(e["type"] == n for n, e in events)
    # Rebuild the message from the events, as a client's stream accumulator does.
    message = events[0][1]["message"]
    assert message["content"] == []
    assert message["stop_reason"] is None
    for name, e in events[1:]:
        if name == "content_block_start":
            message["content"].append(e["content_block"])
        elif name == "content_block_delta" and e["delta"]["type"] == "text_delta":
            message["content"][e["index"]]["text"] += e["delta"]["text"]
        elif name == "content_block_delta":
            message["content"][e["index"]]["input"] = json.loads(e["delta"]["partial_json"])
        elif name == "message_delta":
            message |= e["delta"]
            message["usage"] |= e["usage"]
    assert message == plain


# -- faults and gaps in this wire's shape -----------------------------------------------------

FAULTY = """
task = "t"
[[faults]]
kind = "{kind}"
times = 1
[[script]]
when = {{ turns = 5 }}
reply.final = "never"
"""


@pytest.mark.parametrize(("kind", "status", "err_type"),
                         [("http_500", 500, "api_error"), ("http_429", 429, "rate_limit_error")])
def test_faults_and_gaps_answer_in_the_anthropic_error_shape(
        tmp_path: Path, provider: FakeProvider, kind: str, status: int, err_type: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(FAULTY.format(kind=kind), encoding="utf-8")
    provider.register("f", load_file(path))
    url = provider.root_url("f") + "/v1/messages"
    got, err = post_json(url, body(user("go")))
    assert got == status
    assert err["type"] == "error"
    assert set(err) == {"type", "error"}
    assert err["error"]["type"] == err_type
    assert set(err["error"]) == {"type", "message"}
    gap_status, gap = post_json(url, body(user("go")))
    assert (gap_status, gap["type"], gap["error"]["type"]) == (400, "error",
                                                               "crashmatrix_script_gap")
    assert [(r.wire, r.fault) for r in provider.requests("f")] == [
        ("anthropic", kind), ("anthropic", None)]
