"""post_json: the key derived from the call's reserved ids, the status query before a re-send, replay."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.agent import downstream_call
from crashmatrix.agent import records as R
from crashmatrix.agent.log import SessionLog
from crashmatrix.agent.records import Intent, Replay, Role
from crashmatrix.agent.tools import BUILTINS, CallContext, Registry, ToolResult, invoke
from crashmatrix.fakes.downstream import Outcome
from crashmatrix.fakes.downstream_server import FakeDownstream
from crashmatrix.scenarios.model import Dedup, Endpoint, Service
from tests.support.agent_env import make_agent, make_paths
from tests.support.stub_provider import StubProvider, answer, call, results, tool_calls

TOOL = BUILTINS["post_json"]
ENV = "CRASHMATRIX_SERVICE_MAIL_URL"
FIRST = CallContext("m4.0", "call_1", rerun=False)
RERUN = CallContext("m4.0", "call_1", rerun=True)
KEY = "cm-m4.0-call_1"
HEADER = {"service": "mail", "path": "/messages", "body": {"to": "a@example.com"},
          "key": "header:Idempotency-Key"}
WITH_STATUS = {**HEADER, "status": "/messages/{key}"}


def mail(dedup: str = "header:Idempotency-Key", status: str | None = "/messages/{key}") -> Service:
    return Service(name="mail", create=Endpoint(path="/messages", response={"id": "{id}"}),
                   dedup=Dedup.parse(dedup), status=status)


@pytest.fixture
def fake() -> Iterator[FakeDownstream]:
    with FakeDownstream() as server:
        yield server


def serve(fake: FakeDownstream, monkeypatch: pytest.MonkeyPatch, service: Service) -> None:
    monkeypatch.setenv(ENV, fake.register("case", [service])["mail"])


def run(args: dict[str, Any], context: CallContext | None = FIRST) -> ToolResult:
    return invoke(TOOL, Path("."), args, context=context)


# -- a stub downstream that answers from a script: (status, body), "close" or ("sleep", s, ...) --

@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Stub:
    plan: list[Any]
    seen: list[Seen] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stub]:
    state = Stub([])

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            state.seen.append(Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                   json.loads(raw) if raw else None))
            step: Any = state.plan.pop(0) if state.plan else (599, "unplanned")
            if step == "close":  # read the request, close the connection without a reply
                self.close_connection = True
                return
            if step[0] == "sleep":
                time.sleep(step[1])
                step = step[2:]
            status, text = step
            data = text.encode()
            with contextlib.suppress(OSError):  # a client that timed out has gone
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        do_GET = do_POST = _handle

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/svc"
    monkeypatch.setenv(ENV, state.url)
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


# -- the key ------------------------------------------------------------------------------------

def test_the_key_derives_from_the_reserved_ids_only() -> None:
    assert downstream_call.idempotency_key("m4.0", "call_1") == KEY
    assert downstream_call.idempotency_key("m12.3", "call:a/b ü") == "cm-m12.3-call_a_b__"


def test_a_header_key_reaches_the_service(fake: FakeDownstream, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake, monkeypatch, mail())
    result = run(HEADER)
    assert result == ToolResult('HTTP 201: {"id": "op_1"}')
    (record,) = fake.records("case")
    assert (record.method, record.key, record.outcome) == ("POST", KEY, Outcome.APPLIED)
    assert record.body == {"to": "a@example.com"}


def test_a_path_without_its_leading_slash_is_under_the_base_url(
        fake: FakeDownstream, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake, monkeypatch, mail())
    assert run({**HEADER, "path": "messages"}) == ToolResult('HTTP 201: {"id": "op_1"}')
    assert [r.path for r in fake.records("case")] == ["/messages"]


def test_a_body_key_is_a_field_of_a_copy_of_the_body(fake: FakeDownstream,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake, monkeypatch, mail("body:client_ref", "/messages/by-ref/{key}"))
    args = {**HEADER, "key": "body:client_ref", "status": "/messages/by-ref/{key}"}
    before = json.dumps(args)
    assert not run(args).is_error
    (record,) = fake.records("case")
    assert (record.key, record.body) == (KEY, {"to": "a@example.com", "client_ref": KEY})
    assert json.dumps(args) == before, "the committed arguments are never altered"


def test_a_rerun_with_a_key_only_replays_under_the_same_key(fake: FakeDownstream,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake, monkeypatch, mail(status=None))
    assert not run(HEADER, FIRST).is_error
    assert run(HEADER, RERUN) == ToolResult('HTTP 201: {"id": "op_1"}')
    assert [(r.method, r.key, r.outcome) for r in fake.records("case")] == [
        ("POST", KEY, Outcome.APPLIED), ("POST", KEY, Outcome.REPLAYED)]
    assert fake.applied("case", "mail") == 1


def test_a_rerun_with_status_asks_first_and_sends_nothing_when_applied(
        fake: FakeDownstream, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake, monkeypatch, mail())
    run(WITH_STATUS, FIRST)  # the attempt before the crash
    result = run(WITH_STATUS, RERUN)
    assert result == ToolResult('applied (confirmed by status query): {"id": "op_1"}')
    assert [(r.method, r.outcome) for r in fake.records("case")] == [
        ("POST", Outcome.APPLIED), ("GET", Outcome.STATUS)]


def test_a_rerun_with_status_sends_when_nothing_applied(fake: FakeDownstream,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake, monkeypatch, mail())
    assert not run(WITH_STATUS, RERUN).is_error
    assert [(r.method, r.key, r.outcome) for r in fake.records("case")] == [
        ("GET", KEY, Outcome.NOT_FOUND), ("POST", KEY, Outcome.APPLIED)]


# -- nothing sent -----------------------------------------------------------------------------

def test_a_missing_base_url_is_an_error_and_sends_nothing(fake: FakeDownstream,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fake.register("case", [mail()])
    monkeypatch.delenv(ENV, raising=False)
    result = run(HEADER)
    assert result.is_error
    assert result.content == ("ERROR: post_json: no base URL for service 'mail': "
                              f"{ENV} is not set; nothing was sent")
    assert fake.records("case") == []


@pytest.mark.parametrize("args", [
    {**HEADER, "status": "/messages/latest"},  # no {key}
    {**{k: v for k, v in HEADER.items() if k != "key"}, "status": "/messages/{key}"},  # no key
    {**HEADER, "key": "cookie:x"},
    {**HEADER, "key": "header:Bad Name"},
    {**HEADER, "path": "/messages here"},
    {**HEADER, "service": "Mail"},
    {**HEADER, "body": ["not", "an", "object"]},
    {**HEADER, "extra": 1},
], ids=["status-without-placeholder", "status-without-key", "key-where", "key-header-token",
        "path-with-space", "service-name", "body-not-object", "unknown-argument"])
def test_bad_arguments_are_errors_and_send_nothing(stub: Stub, args: dict[str, Any]) -> None:
    result = run(args)
    assert result.is_error
    assert result.content.startswith("ERROR: post_json")
    assert stub.seen == []


def test_without_a_call_context_nothing_is_sent(stub: Stub) -> None:
    result = invoke(TOOL, Path("."), HEADER)
    assert result.is_error
    assert "no call context" in result.content
    assert stub.seen == []


# -- unknown outcomes -------------------------------------------------------------------------

def test_a_dropped_connection_is_retried_once_with_the_same_key(stub: Stub) -> None:
    stub.plan = ["close", (201, '{"id":"op_1"}')]
    assert run(HEADER) == ToolResult('HTTP 201: {"id":"op_1"}')
    assert [(s.method, s.headers["idempotency-key"]) for s in stub.seen] == [("POST", KEY)] * 2
    assert stub.seen[0].headers["content-type"] == "application/json"


def test_a_timeout_is_an_unknown_outcome(stub: Stub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(downstream_call, "DOWNSTREAM_TIMEOUT_S", 0.2)
    stub.plan = [("sleep", 0.6, 201, "late"), (201, "ok")]
    assert run(HEADER) == ToolResult("HTTP 201: ok")
    assert [s.headers["idempotency-key"] for s in stub.seen] == [KEY, KEY]


def test_a_5xx_then_status_404_sends_again_with_the_same_key(stub: Stub) -> None:
    stub.plan = [(500, "boom"), (404, "none"), (201, "sent")]
    assert run(WITH_STATUS) == ToolResult("HTTP 201: sent")
    assert [(s.method, s.path) for s in stub.seen] == [
        ("POST", "/svc/messages"), ("GET", f"/svc/messages/{KEY}"), ("POST", "/svc/messages")]
    assert stub.seen[2].headers["idempotency-key"] == KEY


def test_a_5xx_then_status_200_is_applied_and_not_sent_again(stub: Stub) -> None:
    stub.plan = [(503, "busy"), (200, '{"id":"op_1"}')]
    assert run(WITH_STATUS) == ToolResult('applied (confirmed by status query): {"id":"op_1"}')
    assert [s.method for s in stub.seen] == ["POST", "GET"]


@pytest.mark.parametrize("status_reply", [(500, "down"), "close", (403, "no")])
def test_a_status_query_without_an_answer_gives_up_unknown(stub: Stub, status_reply: Any) -> None:
    stub.plan = [(429, "slow down"), status_reply, status_reply]
    result = run(WITH_STATUS)
    assert result.is_error
    assert "outcome is unknown (status query: " in result.content
    assert f"GET /messages/{KEY} answers whether it applied" in result.content
    # A query changes nothing: one left unanswered (no reply, a 5xx) is asked once more; a
    # refusal is an answer. Nothing is sent again either way.
    asked = 1 if status_reply == (403, "no") else 2
    assert [s.method for s in stub.seen] == ["POST", *["GET"] * asked]


def test_still_unknown_after_the_re_send_names_the_key(stub: Stub) -> None:
    stub.plan = ["close", (502, "bad gateway")]
    result = run(HEADER)
    assert result == ToolResult(
        "ERROR: post_json: the outcome is unknown (POST: HTTP 502: bad gateway): the service may "
        f"or may not have applied the request. It was sent with idempotency key '{KEY}'; check "
        "the current state before repeating it.", is_error=True)
    assert len(stub.seen) == 2


def test_without_key_or_status_nothing_is_sent_again(stub: Stub) -> None:
    stub.plan = ["close"]
    args = {k: v for k, v in HEADER.items() if k != "key"}
    result = run(args)
    assert result == ToolResult(
        "ERROR: post_json: the outcome is unknown (POST: no reply (the connection was closed or "
        "reset)): the service may or may not have applied the request. It carried no idempotency "
        "key, so it was not sent again; check the current state before repeating it.",
        is_error=True)
    assert len(stub.seen) == 1
    assert "idempotency-key" not in stub.seen[0].headers


def test_a_4xx_is_refused_and_not_sent_again(stub: Stub) -> None:
    stub.plan = [(422, '{"error":"bad"}')]
    result = run(WITH_STATUS)
    assert result == ToolResult('ERROR: post_json: the service refused the request with HTTP 422; '
                                'nothing was applied: {"error":"bad"}', is_error=True)
    assert len(stub.seen) == 1


def test_a_rerun_with_status_and_no_answer_sends_nothing(stub: Stub) -> None:
    stub.plan = [(503, "down"), (503, "down")]
    result = run(WITH_STATUS, RERUN)
    assert result.is_error
    assert "outcome is unknown (status query: HTTP 503: down)" in result.content
    assert [s.method for s in stub.seen] == ["GET", "GET"]


def test_a_status_answer_lost_once_is_asked_again(stub: Stub) -> None:
    stub.plan = ["close", (200, '{"id":"op_1"}')]
    assert run(WITH_STATUS, RERUN) == ToolResult('applied (confirmed by status query): {"id":"op_1"}')
    assert [s.method for s in stub.seen] == ["GET", "GET"]


def test_a_rerun_asks_again_after_its_own_send_is_unknown(stub: Stub) -> None:
    stub.plan = [(404, "none"), "close", (200, '{"id":"op_1"}')]
    assert run(WITH_STATUS, RERUN) == ToolResult('applied (confirmed by status query): {"id":"op_1"}')
    assert [s.method for s in stub.seen] == ["GET", "POST", "GET"]


def test_the_response_body_is_capped(stub: Stub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(downstream_call, "RESPONSE_CAP_BYTES", 4)
    stub.plan = [(200, "abcdefgh")]
    assert run(HEADER).content == "HTTP 200: abcd\n[response truncated at 4 bytes]"


# -- replay policy ----------------------------------------------------------------------------

def test_replay_is_safe_only_with_a_key_or_a_status_query() -> None:
    bare = {k: v for k, v in HEADER.items() if k != "key"}
    assert TOOL.replay is Replay.SAFE
    assert TOOL.replay_of(HEADER) is Replay.SAFE
    assert TOOL.replay_of(WITH_STATUS) is Replay.SAFE
    assert TOOL.replay_of(bare) is Replay.NEVER
    assert TOOL.replay_of("not an object") is Replay.NEVER
    never = Registry.build(["post_json"], {"post_json": Replay.NEVER}).tools["post_json"]
    assert never.replay_of(HEADER) is Replay.NEVER, "an override to never is never loosened"
    for name in ("read", "append_note", "bash"):
        assert BUILTINS[name].replay_of({}) is BUILTINS[name].replay


# -- through the loop and recovery ------------------------------------------------------------

def _script(args: dict[str, Any]) -> Any:
    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if results(messages):
            return answer("done")
        return tool_calls(call("call_1", "post_json", **args))
    return script


@pytest.mark.parametrize(("args", "replay"), [(WITH_STATUS, "safe"),
                                              ({k: v for k, v in HEADER.items() if k != "key"}, "never")])
def test_the_loop_records_the_replay_and_sends_the_reserved_key(
        tmp_path: Path, fake: FakeDownstream, monkeypatch: pytest.MonkeyPatch, args: dict[str, Any],
        replay: str) -> None:
    serve(fake, monkeypatch, mail())
    paths = make_paths(tmp_path)
    with StubProvider(_script(args)) as provider, make_agent(paths, provider.url) as agent:
        assert agent.run_prompt("send it") == "completed"
    started = next(e for e in paths.entries() if e["type"] == "tool_started")
    assert started["replay"] == replay
    (record,) = fake.records("case")
    expected = f"cm-{started['result_id']}-{started['call_id']}"
    assert record.key == (expected if "key" in args else None)


def test_recovery_reruns_with_the_key_of_the_first_attempt(
        tmp_path: Path, fake: FakeDownstream, monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake, monkeypatch, mail())
    paths = make_paths(tmp_path)
    paths.session.mkdir(parents=True)
    log = SessionLog(paths.session / "session.jsonl", fsync=False)
    log.open()
    log.commit([R.run_started("run-1", Intent.PROMPT), R.message("m1.0", "run-1", Role.USER, "t")])
    log.commit([R.message("m2.0", "run-1", Role.ASSISTANT, None,
                          tool_calls=[call("call_1", "post_json", **WITH_STATUS)])])
    log.commit([R.tool_started("run-1", "m2.0", "call_1", "post_json", WITH_STATUS, "m4.0",
                               Replay.SAFE)])
    log.close()
    run(WITH_STATUS, FIRST)  # the effect happened; the crash came before its result was committed
    with StubProvider(lambda m: answer("ok")) as provider, make_agent(paths, provider.url) as agent:
        assert agent.recover() == "completed"
    repair = paths.commits()[3][0]
    assert (repair["recovered"], repair["id"]) == ("rerun", "m4.0")
    assert repair["content"] == 'applied (confirmed by status query): {"id": "op_1"}'
    assert [(r.method, r.key) for r in fake.records("case")] == [("POST", KEY), ("GET", KEY)]
    assert fake.applied("case", "mail") == 1


# -- the seams a mutant patches are looked up at call time -------------------------------------

def test_a_fresh_key_at_send_time_would_apply_twice(fake: FakeDownstream,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake, monkeypatch, mail(status=None))
    sent = iter(range(100))
    monkeypatch.setattr(downstream_call, "idempotency_key", lambda r, c: f"fresh-{next(sent)}")
    run(HEADER, FIRST)
    run(HEADER, RERUN)
    assert fake.applied("case", "mail") == 2


def test_sending_without_asking_would_post_on_a_rerun(fake: FakeDownstream,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    serve(fake, monkeypatch, mail())
    monkeypatch.setattr(downstream_call, "confirm_or_send", downstream_call.send)
    run(WITH_STATUS, FIRST)
    run(WITH_STATUS, RERUN)
    assert [r.method for r in fake.records("case")] == ["POST", "POST"]
