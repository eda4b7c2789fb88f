"""The fake's OpenAI Responses wire: translation both ways, the API's pairing 400s, ids, streams."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.fakes import FakeProvider
from crashmatrix.fakes.response_store import ResponseStore
from crashmatrix.fakes.responses_stream import stream_events
from crashmatrix.fakes.wire import Canonical, Refusal
from crashmatrix.fakes.wire_responses import RESPONSES, check_pairing, output_items, to_canonical
from crashmatrix.scenarios import Scenario, load_builtin, load_file
from tests.support import http

LINE = "修复登录超时"
UNKNOWN = "ERROR: the run was interrupted. The external outcome is unknown."
TOOLS = [{"type": "function", "name": n, "parameters": {}} for n in ("read", "append_note", "bash")]


post = http.post


def post_json(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    status, _, data = post(url, body)
    return status, json.loads(data)


def fc(call_id: str, name: str, **args: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name,
            "arguments": json.dumps(args, ensure_ascii=False)}


def out(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def body(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-x", "instructions": "Be careful.", "input": list(items),
            "tools": TOOLS, **extra}


def calls(response: dict[str, Any]) -> list[tuple[str, str]]:
    return [(o["call_id"], o["name"]) for o in response["output"] if o["type"] == "function_call"]


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


@pytest.fixture
def url(provider: FakeProvider) -> str:
    return provider.register("c", load_builtin()["changelog-fast"]) + "/responses"


# -- request -> canonical ---------------------------------------------------------------------

def test_items_become_chat_messages_one_assistant_message_per_model_turn() -> None:
    items = [
        user("go"),
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking first.", "annotations": []}]},
        {"id": "fc_1", "status": "completed", **fc("call_0", "read", path="a")},
        fc("call_1", "bash", command="true"),
        out("call_0", "text of a"),
        {"type": "function_call_output", "call_id": "call_1",
         "output": [{"type": "input_text", "text": "exit "}, {"type": "input_text", "text": "0"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "d"}]},
    ]
    assert to_canonical("Be careful.", items) == [
        {"role": "system", "content": "Be careful."},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Checking first.", "tool_calls": [
            {"id": "call_0", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a"}'}},
            {"id": "call_1", "type": "function",
             "function": {"name": "bash", "arguments": '{"command": "true"}'}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "text of a"},
        {"role": "tool", "tool_call_id": "call_1", "content": "exit 0"},
        {"role": "developer", "content": "d"},
    ]


def test_a_function_call_after_a_tool_result_starts_a_new_turn() -> None:
    items = [fc("call_0", "read", path="a"), out("call_0", "x"), fc("call_1", "read", path="b")]
    turns = [m for m in to_canonical(None, items) if m["role"] == "assistant"]
    assert [[c["id"] for c in t["tool_calls"]] for t in turns] == [["call_0"], ["call_1"]]


def test_a_plain_string_input_is_one_user_message() -> None:
    got = RESPONSES.parse({"input": "hello", "tools": TOOLS}, ResponseStore())
    assert isinstance(got, Canonical)
    assert got.messages == [{"role": "user", "content": "hello"}]
    assert got.tools == ["read", "append_note", "bash"]


# -- decision -> response ---------------------------------------------------------------------

def test_a_reply_becomes_a_message_item_then_function_call_items() -> None:
    message = {"role": "assistant", "content": "Checking.", "refusal": None, "tool_calls": [
        {"id": "call_3", "type": "function",
         "function": {"name": "read", "arguments": '{"path": "a"}'}}]}
    assert output_items(message, "abc") == [
        {"id": "msg_abc", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking.", "annotations": [],
                      "logprobs": []}]},
        {"id": "fc_abc_0", "type": "function_call", "status": "completed", "call_id": "call_3",
         "name": "read", "arguments": '{"path": "a"}'},
    ]


def test_a_response_over_http_has_the_apis_shape_and_is_recorded_canonically(
        provider: FakeProvider, url: str) -> None:
    status, ctype, data = post(url, body(user("Append the line.")))
    assert (status, ctype) == (200, "application/json")
    got = json.loads(data)
    assert got["object"] == "response"
    assert got["status"] == "completed"
    assert got["id"].startswith("resp_")
    assert got["model"] == "gpt-x"
    assert got["instructions"] == "Be careful."
    assert got["store"] is True
    (item,) = got["output"]
    assert item["id"].startswith("fc_")
    assert item["status"] == "completed"
    assert (item["type"], item["call_id"], item["name"]) == ("function_call", "call_0",
                                                            "append_note")
    assert json.loads(item["arguments"]) == {"path": "CHANGELOG.md", "line": LINE}
    assert got["usage"]["total_tokens"] == (got["usage"]["input_tokens"]
                                            + got["usage"]["output_tokens"])
    (rec,) = provider.requests("c")
    assert (rec.wire, rec.status, rec.rule, rec.tools) == (
        "responses", 200, "start", ["read", "append_note", "bash"])
    assert rec.messages == [{"role": "system", "content": "Be careful."},
                            {"role": "user", "content": "Append the line."}]
    assert rec.reply is not None
    assert rec.reply["tool_calls"][0]["id"] == "call_0"


def test_the_whole_script_runs_and_ids_stay_unique(url: str, provider: FakeProvider) -> None:
    items: list[dict[str, Any]] = [user("Append the line.")]
    results = iter([UNKNOWN, f"# Changelog\n\n{LINE}\n", "exit code 0\n1 passed"])
    seen_calls: list[str] = []
    seen_items: list[str] = []
    for _ in range(6):
        status, got = post_json(url, body(*items))
        assert status == 200, got
        items += got["output"]
        seen_items += [o["id"] for o in got["output"]]
        new = calls(got)
        if not new:
            break
        seen_calls += [c for c, _ in new]
        items += [out(c, next(results)) for c, _ in new]
    assert [r.rule for r in provider.requests("c")] == [
        "start", "check-after-unknown-append", "run-tests", "report"]
    assert got["output"][0]["content"][0]["text"] == f"Added '{LINE}' to CHANGELOG.md. " \
                                                      "Tests: 1 passed"
    assert seen_calls == ["call_0", "call_1", "call_2"]
    assert len(set(seen_items)) == len(seen_items)


def test_previous_response_id_continues_a_stored_response(url: str,
                                                          provider: FakeProvider) -> None:
    _, first = post_json(url, body(user("Append the line.")))
    ((call_id, _),) = calls(first)
    status, second = post_json(url, {"model": "gpt-x", "previous_response_id": first["id"],
                                     "input": [out(call_id, UNKNOWN)], "tools": TOOLS})
    assert status == 200, second
    assert second["previous_response_id"] == first["id"]
    assert calls(second) == [("call_1", "read")]
    # The record holds the whole history, the stored part included, in the canonical shape.
    rec = provider.requests("c")[1]
    assert [m["role"] for m in rec.messages] == ["user", "assistant", "tool"]
    assert rec.rule == "check-after-unknown-append"


def test_an_unknown_previous_response_is_the_apis_400(url: str) -> None:
    status, err = post_json(url, {"previous_response_id": "resp_nope", "input": []})
    assert (status, err) == (400, {"error": {
        "message": "Previous response with id 'resp_nope' not found.",
        "type": "invalid_request_error", "param": "previous_response_id",
        "code": "previous_response_not_found"}})


def test_a_response_made_with_store_false_cannot_be_continued(url: str) -> None:
    _, first = post_json(url, body(user("Append the line."), store=False))
    assert first["store"] is False
    status, err = post_json(url, {"previous_response_id": first["id"], "input": []})
    assert status == 400
    assert err["error"]["code"] == "previous_response_not_found"


# -- pairing ----------------------------------------------------------------------------------

def test_a_call_without_its_output_is_the_apis_400(url: str, provider: FakeProvider) -> None:
    status, err = post_json(url, body(user("go"), fc("call_0", "read", path="a"),
                                      fc("call_1", "bash", command="x"), out("call_1", "ok")))
    assert (status, err) == (400, {"error": {
        "message": "No tool output found for function call call_0.",
        "type": "invalid_request_error", "param": "input", "code": None}})
    (rec,) = provider.requests("c")
    assert (rec.wire, rec.status, rec.error, rec.rule) == ("responses", 400, err, None)
    assert rec.messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "ok"}


def test_an_output_without_its_call_is_the_apis_400(url: str) -> None:
    status, err = post_json(url, body(user("go"), out("call_9", "appended")))
    assert (status, err) == (400, {"error": {
        "message": "No tool call found for function call output with call_id call_9.",
        "type": "invalid_request_error", "param": "input", "code": None}})


@pytest.mark.parametrize(("items", "refused"), [
    # An output before its call answers nothing yet.
    ([out("call_0", "x"), fc("call_0", "read", path="a")], "call_0"),
    # A second output for one call breaks the exactly-one-result promise.
    ([fc("call_0", "read", path="a"), out("call_0", "x"), out("call_0", "x")], "call_0"),
])
def test_misplaced_or_repeated_outputs_are_orphans(items: list[dict[str, Any]],
                                                   refused: str) -> None:
    err = check_pairing(items)
    assert err is not None
    assert err.message == f"No tool call found for function call output with call_id {refused}."


def test_other_items_may_sit_between_a_call_and_its_output() -> None:
    items = [fc("call_0", "read", path="a"), user("meanwhile"), out("call_0", "x")]
    assert check_pairing(items) is None


@pytest.mark.parametrize(("item", "param"), [
    ({"type": "web_search_call"}, "input[1].type"),
    ({"type": "function_call", "name": "read", "arguments": "{}"}, "input[1].call_id"),
    ({"type": "function_call_output", "call_id": "call_0"}, "input[1].output"),
    ({"role": "robot", "content": "x"}, "input[1].role"),
    ("text", "input[1]"),
])
def test_malformed_items_are_refused_naming_the_field(item: Any, param: str) -> None:
    got = RESPONSES.parse({"input": [user("go"), item]}, ResponseStore())
    assert isinstance(got, Refusal)
    assert (got.error.status, got.error.body["error"]["param"]) == (400, param)
    assert got.error.body["error"]["type"] == "invalid_request_error"


# -- streaming --------------------------------------------------------------------------------

def sse_events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """Parse a server-sent event stream the way a client does: event name, then JSON data."""
    events = []
    for block in data.decode().split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def test_a_streamed_response_sends_the_apis_events_ending_with_the_same_response(
        url: str) -> None:
    request = body(user("go"), fc("call_0", "append_note", path="CHANGELOG.md", line=LINE),
                   out("call_0", UNKNOWN))
    _, plain = post_json(url, request)
    status, ctype, data = post(url, {**request, "stream": True})
    assert (status, ctype) == (200, "text/event-stream; charset=utf-8")
    events = sse_events(data)
    assert [name for name, _ in events] == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.completed"]
    assert all(e["type"] == name for name, e in events)
    assert [e["sequence_number"] for _, e in events] == list(range(len(events)))
    assert events[0][1]["response"]["status"] == "in_progress"
    assert events[-1][1]["response"] == plain
    text = "".join(e["delta"] for n, e in events if n == "response.output_text.delta")
    args = "".join(e["delta"] for n, e in events if n == "response.function_call_arguments.delta")
    assert text == plain["output"][0]["content"][0]["text"]
    assert args == plain["output"][1]["arguments"]


def test_stream_events_announce_items_empty_before_they_are_done() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    response = {"output": output_items(message, "d"), "id": "resp_d"}
    added = [e for e in stream_events(response) if e["type"] == "response.output_item.added"]
    assert added[0]["item"]["arguments"] == ""
    assert added[0]["item"]["status"] == "in_progress"


# -- faults and gaps in this wire's shape -----------------------------------------------------

FAULTY = """
task = "t"
[[faults]]
kind = "{kind}"
times = 1
[[script]]
name = "done"
reply.final = "done"
"""


@pytest.mark.parametrize(("kind", "status", "err_type"),
                         [("http_500", 500, "server_error"), ("http_429", 429, "requests")])
def test_retryable_faults_answer_in_the_openai_error_shape(
        tmp_path: Path, provider: FakeProvider, kind: str, status: int, err_type: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(FAULTY.format(kind=kind), encoding="utf-8")
    scenario: Scenario = load_file(path)
    url = provider.register("f", scenario) + "/responses"
    got, err = post_json(url, body(user("go"), stream=True))
    assert got == status
    assert set(err) == {"error"}
    assert err["error"]["type"] == err_type
    assert set(err["error"]) == {
        "message", "type", "param", "code"}
    assert post_json(url, body(user("go")))[0] == 200
    assert [(r.wire, r.fault) for r in provider.requests("f")] == [
        ("responses", kind), ("responses", None)]
