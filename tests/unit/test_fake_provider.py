"""The fake provider over real HTTP: pairing 400s, pure replies, scheduled faults, clean stop."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from crashmatrix.fakes import FakeProvider
from crashmatrix.scenarios import Scenario, load_builtin, load_file

UNKNOWN = (
    "ERROR: the run was interrupted before this call's result was saved. The external outcome "
    "is unknown: the tool may or may not have taken effect. The call was not re-run "
    "automatically; check the current state before repeating it."
)
LINE = "修复登录超时"
SYSTEM = {"role": "system", "content": "You are a careful coding agent."}
TASK = {"role": "user", "content": "Append the line to CHANGELOG.md, run the tests, report."}


def post(base_url: str, body: Any, timeout: float = 5.0) -> tuple[int, dict[str, Any]]:
    """One request with a plain http.client, the way an agent would send it."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", parts.path + "/chat/completions", body=data,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def call(call_id: str, tool: str, **args: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": tool, "arguments": json.dumps(args, ensure_ascii=False)}}


def assistant(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def request(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": [SYSTEM, TASK, *messages],
            "tools": [{"type": "function", "function": {"name": n, "parameters": {}}}
                      for n in ("read", "append_note", "bash")]}


def reply_of(body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = body["choices"][0]["message"]
    return message


def calls_of(body: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in reply_of(body).get("tool_calls") or []]


@pytest.fixture(scope="module")
def builtins() -> dict[str, Scenario]:
    return load_builtin()


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


def scenario_from(tmp_path: Path, text: str, name: str = "t") -> Scenario:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return load_file(path)


FAULTY = """
task = "t"
[agent]
provider_timeout_s = 0.2
[[faults]]
kind = "{kind}"
times = 2
when = {{ turns = 0 }}
{extra}
[[script]]
name = "start"
when = {{ turns = 0 }}
reply.tool_calls = [{{ tool = "read", args = {{ path = "a.txt" }} }}]
[[script]]
name = "done"
reply.final = "done"
"""


# -- pairing --------------------------------------------------------------------------------

def test_unanswered_tool_call_gets_the_real_400(provider: FakeProvider,
                                                builtins: dict[str, Scenario]) -> None:
    url = provider.register("c", builtins["changelog-fast"])
    body = request(assistant(call("call_0", "append_note", path="CHANGELOG.md", line=LINE),
                             call("call_1", "read", path="README.md")),
                   result("call_1", "# Demo"),
                   {"role": "user", "content": "and?"})
    status, err = post(url, body)
    assert status == 400
    assert err == {"error": {
        "message": "An assistant message with 'tool_calls' must be followed by tool messages "
                   "responding to each 'tool_call_id'. The following tool_call_ids did not "
                   "have response messages: call_0",
        "type": "invalid_request_error",
        "param": "messages.[4].role",
        "code": None,
    }}
    (rec,) = provider.requests("c")
    assert (rec.status, rec.reply, rec.rule) == (400, None, None)
    assert rec.error == err


def test_calls_at_the_end_of_history_are_unanswered_too(provider: FakeProvider,
                                                        builtins: dict[str, Scenario]) -> None:
    url = provider.register("c", builtins["changelog-fast"])
    status, err = post(url, request(assistant(call("call_0", "bash", command="true"))))
    assert status == 400
    assert err["error"]["param"] == "messages.[2].role"
    assert err["error"]["message"].endswith("did not have response messages: call_0")


def test_orphan_tool_message_gets_the_real_400(provider: FakeProvider,
                                               builtins: dict[str, Scenario]) -> None:
    url = provider.register("c", builtins["changelog-fast"])
    status, err = post(url, request(result("call_9", "appended 1 line")))
    assert status == 400
    assert err == {"error": {
        "message": "Invalid parameter: messages with role 'tool' must be a response to a "
                   "preceeding message with 'tool_calls'.",
        "type": "invalid_request_error",
        "param": "messages.[2].role",
        "code": None,
    }}


def test_a_second_result_for_the_same_call_is_an_orphan(provider: FakeProvider,
                                                         builtins: dict[str, Scenario]) -> None:
    url = provider.register("c", builtins["changelog-fast"])
    body = request(assistant(call("call_0", "read", path="a")), result("call_0", "x"),
                   result("call_0", "x"))
    status, err = post(url, body)
    assert (status, err["error"]["param"]) == (400, "messages.[4].role")


# -- replies: pure functions of the history -------------------------------------------------

def test_same_history_same_reply_even_from_a_fresh_provider(builtins: dict[str, Scenario]
                                                            ) -> None:
    body = request(assistant(call("call_0", "append_note", path="CHANGELOG.md", line=LINE)),
                   result("call_0", UNKNOWN))
    replies = []
    for _ in range(2):
        with FakeProvider() as p:
            url = p.register("c", builtins["changelog-fast"])
            replies += [post(url, body), post(url, body)]
    assert all(r == replies[0] for r in replies)
    status, first = replies[0]
    assert status == 200
    assert calls_of(first) == [("call_1", "read", {"path": "CHANGELOG.md"})]


def test_changelog_script_checks_after_an_unknown_outcome(provider: FakeProvider,
                                                          builtins: dict[str, Scenario]) -> None:
    url = provider.register("c", builtins["changelog-fast"])
    append = assistant(call("call_0", "append_note", path="CHANGELOG.md", line=LINE))
    read = assistant(call("call_1", "read", path="CHANGELOG.md"))

    _, first = post(url, request())
    assert calls_of(first) == [("call_0", "append_note", {"path": "CHANGELOG.md", "line": LINE})]
    _, present = post(url, request(append, result("call_0", UNKNOWN), read,
                                   result("call_1", f"# Changelog\n\n{LINE}\n")))
    assert [(i, n) for i, n, _ in calls_of(present)] == [("call_2", "bash")]
    _, missing = post(url, request(append, result("call_0", UNKNOWN), read,
                                   result("call_1", "# Changelog\n\n")))
    assert calls_of(missing) == [("call_2", "append_note", {"path": "CHANGELOG.md", "line": LINE})]

    bash = assistant(call("call_1", "bash", command="x"))
    _, final = post(url, request(append, result("call_0", "appended 1 line to CHANGELOG.md"),
                                 bash, result("call_1", "exit code 0\n1 passed in 0.01s\n")))
    assert reply_of(final)["content"] == f"Added '{LINE}' to CHANGELOG.md. Tests: 1 passed in 0.01s"
    assert final["choices"][0]["finish_reason"] == "stop"
    assert [r.rule for r in provider.requests("c")] == [
        "start", "run-tests", "append-if-missing", "report"]


def test_records_hold_what_the_verifier_needs(provider: FakeProvider,
                                              builtins: dict[str, Scenario]) -> None:
    url = provider.register("case/07:effect.after:append_note/kill", builtins["changelog-fast"])
    body = request()
    post(url, body)
    (rec,) = provider.requests("case/07:effect.after:append_note/kill")
    data = rec.to_json()
    assert data["index"] == 0
    assert data["messages"] == body["messages"]
    assert data["tools"] == ["read", "append_note", "bash"]
    assert (data["status"], data["fault"], data["rule"]) == (200, None, "start")
    assert data["reply"]["tool_calls"][0]["id"] == "call_0"
    json.dumps(data)  # plain JSON all the way down


def test_script_gap_is_a_visible_400(tmp_path: Path, provider: FakeProvider) -> None:
    s = scenario_from(tmp_path, 'task = "t"\n[[script]]\nwhen = { turns = 5 }\n'
                                'reply.final = "never"\n')
    url = provider.register("c", s)
    status, err = post(url, request())
    assert status == 400
    assert err["error"]["type"] == "crashmatrix_script_gap"


def test_unknown_and_forgotten_cases_get_404(provider: FakeProvider,
                                             builtins: dict[str, Scenario]) -> None:
    url = provider.register("c", builtins["finished"])
    assert post(url, request())[0] == 200
    provider.forget("c")
    assert post(url, request())[0] == 404
    with pytest.raises(KeyError):
        provider.requests("c")


def test_invalid_json_body_is_a_400(provider: FakeProvider, builtins: dict[str, Scenario]) -> None:
    url = provider.register("c", builtins["finished"])
    status, err = post(url, b"{not json")
    assert status == 400
    assert "could not parse the JSON body" in err["error"]["message"]


# -- faults ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "status", "err_type"),
                         [("http_500", 500, "server_error"), ("http_429", 429, "requests")])
def test_http_faults_fire_times_then_the_script_answers(
        tmp_path: Path, provider: FakeProvider, kind: str, status: int, err_type: str) -> None:
    url = provider.register("c", scenario_from(tmp_path, FAULTY.format(kind=kind, extra="")))
    got = [post(url, request()) for _ in range(3)]
    assert [g[0] for g in got] == [status, status, 200]
    assert got[0][1]["error"]["type"] == err_type
    assert [(r.status, r.fault) for r in provider.requests("c")] == [
        (status, kind), (status, kind), (200, None)]


def test_timeout_fault_holds_past_the_client_timeout(tmp_path: Path,
                                                     provider: FakeProvider) -> None:
    url = provider.register("c", scenario_from(
        tmp_path, FAULTY.format(kind="timeout", extra="hold_s = 0.6")))
    with pytest.raises(TimeoutError):
        post(url, request(), timeout=0.2)
    rec = provider.requests("c")[0]
    assert (rec.status, rec.fault) == (None, "timeout")


def test_drop_fault_closes_without_a_response(tmp_path: Path, provider: FakeProvider) -> None:
    url = provider.register("c", scenario_from(tmp_path, FAULTY.format(kind="drop", extra="")))
    for _ in range(2):  # times = 2
        with pytest.raises(http.client.RemoteDisconnected):
            post(url, request())
    assert post(url, request())[0] == 200
    assert [r.fault for r in provider.requests("c")] == ["drop", "drop", None]


def test_fault_schedules_are_per_case(tmp_path: Path, provider: FakeProvider) -> None:
    s = scenario_from(tmp_path, FAULTY.format(kind="http_500", extra=""))
    a, b = provider.register("a", s), provider.register("b", s)
    assert [post(a, request())[0] for _ in range(3)] == [500, 500, 200]
    assert post(b, request())[0] == 500


# -- lifecycle ------------------------------------------------------------------------------

def provider_threads(before: set[threading.Thread]) -> list[threading.Thread]:
    """Threads started since `before` that serve the provider (its own names, or socketserver's
    default handler name): a test runner (xdist's execnet) may start threads of its own."""
    return [t for t in set(threading.enumerate()) - before
            if t.name.startswith("fake-provider") or "process_request" in t.name]


def test_stop_wakes_held_responses_and_leaves_no_threads(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    p = FakeProvider().start()
    url = p.register("c", scenario_from(tmp_path, FAULTY.format(kind="timeout",
                                                                 extra="hold_s = 30")))
    with pytest.raises(TimeoutError):
        post(url, request(), timeout=0.2)
    started = time.monotonic()
    p.stop()
    # Far below the 30 s hold: stop() woke the held response instead of waiting it out.
    assert time.monotonic() - started < 10
    assert provider_threads(before) == []
    p.stop()  # idempotent


def test_register_twice_is_refused(provider: FakeProvider, builtins: dict[str, Scenario]) -> None:
    provider.register("c", builtins["finished"])
    with pytest.raises(ValueError, match="already registered"):
        provider.register("c", builtins["finished"])


# -- call id schemes ------------------------------------------------------------------------

TWO_TURNS = """
task = "t"
{provider}
[[script]]
name = "start"
when = {{ turns = 0 }}
reply.tool_calls = [
  {{ tool = "read", args = {{ path = "a.txt" }} }},
  {{ tool = "read", args = {{ path = "b.txt" }} }},
]
[[script]]
name = "again"
when = {{ turns = 1 }}
reply.tool_calls = [{{ tool = "read", args = {{ path = "c.txt" }} }}]
[[script]]
name = "done"
reply.final = "done"
"""


@pytest.mark.parametrize(("provider_table", "first", "second"), [
    ("", ["call_0", "call_1"], ["call_2"]),
    ('[provider]\ncall_ids = "history"', ["call_0", "call_1"], ["call_2"]),
    ('[provider]\ncall_ids = "per-response"', ["call_0", "call_1"], ["call_0"]),
])
def test_call_ids_count_across_the_history_or_restart_in_every_reply(
        tmp_path: Path, provider: FakeProvider, provider_table: str, first: list[str],
        second: list[str]) -> None:
    url = provider.register("ids", scenario_from(tmp_path, TWO_TURNS.format(provider=provider_table)))
    status, body = post(url, request())
    assert status == 200
    assert [c[0] for c in calls_of(body)] == first
    turn_one = reply_of(body)
    history = request(turn_one, *(result(i, "text") for i in first))
    status, body = post(url, history)
    assert status == 200, body
    assert [c[0] for c in calls_of(body)] == second
    # The same history gives the same ids again (replies stay a pure function of the history).
    assert [c[0] for c in calls_of(post(url, history)[1])] == second


def test_one_thread_serves_every_request_and_connection(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    with FakeProvider() as p:
        urls = [p.register(k, load_builtin()["finished"]) for k in "abcd"]
        conns = [http.client.HTTPConnection("127.0.0.1", p.port, timeout=5) for _ in urls]
        for _ in range(3):  # each connection kept open across its requests
            for conn, url in zip(conns, urls, strict=True):
                conn.request("POST", urlsplit(url).path + "/chat/completions",
                             body=json.dumps(request()).encode(),
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                assert resp.status == 200
                resp.read()
        assert [t.name for t in provider_threads(before)] == ["fake-provider"]
        for conn in conns:
            conn.close()
    assert provider_threads(before) == []


def test_fresh_call_ids_are_new_in_every_response_and_survive_a_restored_state(
        tmp_path: Path, provider: FakeProvider) -> None:
    # As a real model gives them: the same history asked again (a restart) gets new ids, so an
    # agent keying a downstream request on the call id re-keys it.
    scenario = scenario_from(tmp_path, TWO_TURNS.format(provider='[provider]\ncall_ids = "fresh"'))
    url = provider.register("fresh", scenario)
    assert [c[0] for c in calls_of(post(url, request())[1])] == ["call_0", "call_1"]
    assert [c[0] for c in calls_of(post(url, request())[1])] == ["call_2", "call_3"]
    # A crash state carries the count: a case started from it goes on numbering where it was.
    again = provider.register("fresh-again", scenario, provider.state("fresh"))
    assert provider.state("fresh").issued == 4
    assert [c[0] for c in calls_of(post(again, request())[1])] == ["call_4", "call_5"]
