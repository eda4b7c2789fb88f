"""One scenario script serves every wire: same decisions, same canonical records, own shapes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from crashmatrix.fakes import FakeProvider
from crashmatrix.scenarios import load_builtin

LINE = "修复登录超时"
TASK = "Append the line."
RESULTS = {"append_note": "ERROR: interrupted. The external outcome is unknown.",
           "read": f"# Changelog\n\n{LINE}\n", "bash": "exit code 0\n1 passed"}

Call = tuple[str, str, dict[str, Any]]  # id, tool, arguments


def post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5.0) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


class Chat:
    path = "/v1/chat/completions"

    def __init__(self) -> None:
        self.history: list[dict[str, Any]] = [{"role": "system", "content": "sys"},
                                              {"role": "user", "content": TASK}]

    def body(self) -> dict[str, Any]:
        return {"model": "m", "messages": self.history}

    def take(self, got: dict[str, Any]) -> list[Call]:
        message = got["choices"][0]["message"]
        self.history.append(message)
        return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in message.get("tool_calls") or []]

    def answer(self, results: list[tuple[str, str]]) -> None:
        self.history += [{"role": "tool", "tool_call_id": i, "content": r} for i, r in results]


class Responses:
    path = "/v1/responses"

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = [{"role": "user", "content": TASK}]

    def body(self) -> dict[str, Any]:
        return {"model": "m", "instructions": "sys", "input": self.items}

    def take(self, got: dict[str, Any]) -> list[Call]:
        self.items += got["output"]
        return [(o["call_id"], o["name"], json.loads(o["arguments"]))
                for o in got["output"] if o["type"] == "function_call"]

    def answer(self, results: list[tuple[str, str]]) -> None:
        self.items += [{"type": "function_call_output", "call_id": i, "output": r}
                       for i, r in results]


class Anthropic:
    path = "/v1/messages"

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]

    def body(self) -> dict[str, Any]:
        return {"model": "m", "max_tokens": 100, "system": "sys", "messages": self.messages}

    def take(self, got: dict[str, Any]) -> list[Call]:
        self.messages.append({"role": "assistant", "content": got["content"]})
        return [(b["id"], b["name"], b["input"]) for b in got["content"]
                if b["type"] == "tool_use"]

    def answer(self, results: list[tuple[str, str]]) -> None:
        self.messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": r} for i, r in results]})


CLIENTS: dict[str, Callable[[], Chat | Responses | Anthropic]] = {
    "chat": Chat, "responses": Responses, "anthropic": Anthropic}


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


def run(provider: FakeProvider, wire: str) -> list[list[tuple[str, dict[str, Any]]]]:
    """Drive the changelog-fast script to its end on one wire; the calls of each reply."""
    provider.register(wire, load_builtin()["changelog-fast"])
    client = CLIENTS[wire]()
    turns = []
    for _ in range(8):
        status, got = post(provider.root_url(wire) + client.path,
                           json.dumps(client.body()).encode())
        assert status == 200, got
        calls = client.take(got)
        turns.append([(tool, args) for _, tool, args in calls])
        if not calls:
            return turns
        client.answer([(i, RESULTS[tool]) for i, tool, _ in calls])
    raise AssertionError("the script did not finish")


def strip_ids(messages: list[Any]) -> list[Any]:
    """The canonical messages without call ids (the one thing each wire formats its own way)
    and without the chat reply's `refusal` field (only the chat wire echoes it back)."""
    text = json.dumps(messages, ensure_ascii=False)
    for prefix in ("toolu_", "call_"):
        text = text.replace(f'"{prefix}', '"ID_')
    out = json.loads(text)
    for m in out:
        m.pop("refusal", None)
    return out


def test_every_wire_gets_the_same_decisions_and_canonical_records(
        provider: FakeProvider) -> None:
    turns = {wire: run(provider, wire) for wire in CLIENTS}
    assert turns["responses"] == turns["chat"] == turns["anthropic"]
    assert [[t for t, _ in turn] for turn in turns["chat"]] == [
        ["append_note"], ["read"], ["bash"], []]
    records = {wire: provider.requests(wire) for wire in CLIENTS}
    for wire, recs in records.items():
        assert {r.wire for r in recs} == {wire}
        assert [r.rule for r in recs] == ["start", "check-after-unknown-append", "run-tests",
                                          "report"]
    for a, b in zip(records["chat"], records["anthropic"], strict=True):
        assert strip_ids(a.messages) == strip_ids(b.messages)
        assert strip_ids([a.reply]) == strip_ids([b.reply])
    for a, b in zip(records["chat"], records["responses"], strict=True):
        assert strip_ids(a.messages) == strip_ids(b.messages)
        assert a.reply == b.reply  # both OpenAI wires use `call_<k>` ids


@pytest.mark.parametrize(("path", "shape"), [
    ("/v1/chat/completions", {"error"}), ("/v1/responses", {"error"}),
    ("/v1/messages", {"type", "error"})])
def test_unknown_cases_and_bad_json_answer_in_each_wires_shape(
        provider: FakeProvider, path: str, shape: set[str]) -> None:
    status, err = post(f"http://127.0.0.1:{provider.port}/nobody{path}", b"{}")
    assert (status, set(err)) == (404, shape)
    provider.register("c", load_builtin()["finished"])
    status, err = post(provider.root_url("c") + path, b"{not json")
    assert (status, set(err)) == (400, shape)
    assert err["error"]["type"] == "invalid_request_error"
    (rec,) = provider.requests("c")
    assert (rec.status, rec.messages) == (400, [])


def test_a_path_of_no_wire_is_an_invalid_url(provider: FakeProvider) -> None:
    provider.register("c", load_builtin()["finished"])
    status, err = post(provider.root_url("c") + "/v1/completions", b"{}")
    assert status == 404
    assert err["error"]["message"].startswith("Invalid URL (POST /c/")
    assert provider.requests("c") == []


def test_chat_records_say_chat_by_default(provider: FakeProvider) -> None:
    provider.register("c", load_builtin()["finished"])
    post(provider.base_url("c") + "/chat/completions",
         json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode())
    (rec,) = provider.requests("c")
    assert rec.wire == "chat"
    assert rec.to_json()["wire"] == "chat"
