"""The fake downstream: operations applied once per key, replays, conflicts, status queries, records."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote

import pytest

from crashmatrix.fakes import Downstream, DownstreamRecord, FakeDownstream
from crashmatrix.fakes import downstream_server as server
from crashmatrix.fakes.downstream import Outcome
from crashmatrix.scenarios.model import Dedup, Endpoint, Service

MAIL_RESPONSE = {"id": "{id}", "key": "{key}", "state": "queued", "count": 1,
                 "links": [{"self": "/messages/{id}"}], "meta": {"ref": "{key}-{id}", "ok": True}}
MAIL = Service(name="mail", create=Endpoint(path="/messages", response=MAIL_RESPONSE),
               dedup=Dedup.parse("header:Idempotency-Key"), status="/messages/{key}")
ORDERS = Service(name="orders",
                 create=Endpoint(method="PUT", path="/orders", response={"order": "{id}"}),
                 dedup=Dedup.parse("body:client_order_id"), status="/orders/{id}/status")
LOG = Service(name="log", create=Endpoint(path="/entries", response={"entry": "{id}"}),
              status="/entries/{id}")
SERVICES = (MAIL, ORDERS, LOG)
EMAIL = {"to": "a@example.com", "subject": "hi"}


def rendered(template: Any, op: str, key: str | None) -> Any:
    """What the template should answer for `op` and `key`, filled independently of the fake."""
    if isinstance(template, str):
        return template.replace("{key}", key or "\0").replace("{id}", op).replace("\0", "")
    if isinstance(template, Mapping):
        return {k: rendered(v, op, key) for k, v in template.items()}
    if isinstance(template, list | tuple):
        return [rendered(v, op, key) for v in template]
    return template


def call(ds: Downstream, service: str, method: str, path: str, body: Any = None,
         headers: Mapping[str, str] | None = None,
         raw: bytes | None = None) -> tuple[int, Any, DownstreamRecord]:
    data = raw if raw is not None else b"" if body is None else json.dumps(body).encode()
    status, out, record, _ = ds.handle(service, method, path, headers or {}, data)
    assert status is not None  # no fault is armed in these tests
    return status, json.loads(out), record


def send_mail(ds: Downstream, key: str | None, body: Any = EMAIL) -> tuple[int, Any, DownstreamRecord]:
    headers = {} if key is None else {"idempotency-key": key}
    return call(ds, "mail", "POST", "/messages", body, headers)


# -- the rules, without sockets ------------------------------------------------------------------
def test_a_create_applies_an_operation_and_answers_the_rendered_response() -> None:
    ds = Downstream(SERVICES)
    status, data, record = send_mail(ds, "k1")
    assert (status, data) == (201, rendered(MAIL_RESPONSE, "op_1", "k1"))
    assert record == DownstreamRecord(1, "mail", "POST", "/messages", "k1", EMAIL,
                                      Outcome.APPLIED, 201, "op_1", kind="create")
    assert ds.applied("mail") == 1
    assert record.to_json()["outcome"] == "applied"
    json.dumps(record.to_json())  # JSON data as it is


def test_a_seen_key_with_the_same_body_replays_the_first_answer_and_applies_nothing() -> None:
    ds = Downstream(SERVICES)
    first = send_mail(ds, "k1")
    # The same body re-serialised (another key order) is the same request.
    again = call(ds, "mail", "POST", "/messages", raw=json.dumps(dict(reversed(EMAIL.items())),
                                                                   indent=2).encode(),
                 headers={"Idempotency-Key": "k1"})
    assert again[:2] == first[:2]
    assert (again[2].outcome, again[2].op, again[2].key) == (Outcome.REPLAYED, "op_1", "k1")
    assert ds.applied("mail") == 1


def test_a_seen_key_with_another_body_is_a_422_conflict_naming_the_key() -> None:
    ds = Downstream(SERVICES)
    send_mail(ds, "k1")
    status, data, record = send_mail(ds, "k1", {**EMAIL, "subject": "other"})
    assert status == 422
    assert "'k1'" in data["error"]["message"]
    assert data["error"]["key"] == "k1"
    assert (record.outcome, record.op) == (Outcome.CONFLICT, None)
    assert ds.applied("mail") == 1
    # JSON types count: 1 and true are different bodies.
    send_mail(ds, "k2", {"n": 1})
    assert send_mail(ds, "k2", {"n": True})[0] == 422


def test_without_a_key_every_create_is_a_new_operation() -> None:
    ds = Downstream(SERVICES)
    ops = [send_mail(ds, key)[2] for key in (None, "", None)]
    assert [(r.op, r.key, r.outcome) for r in ops] == [
        (f"op_{n}", None, Outcome.APPLIED) for n in (1, 2, 3)]
    assert ds.applied("mail") == 3


def test_a_key_that_reads_like_a_placeholder_is_not_filled_in_again() -> None:
    ds = Downstream(SERVICES)
    assert send_mail(ds, "{id}")[1]["key"] == "{id}"


def test_the_header_name_is_matched_in_any_case() -> None:
    ds = Downstream(SERVICES)
    send_mail(ds, "k1")
    assert call(ds, "mail", "POST", "/messages", EMAIL, {"IDEMPOTENCY-KEY": "k1"})[2].outcome \
        is Outcome.REPLAYED


def test_a_body_field_dedups_and_is_stringified_when_a_number() -> None:
    ds = Downstream(SERVICES)
    order = {"client_order_id": 42, "item": "book"}
    status, data, record = call(ds, "orders", "PUT", "/orders", order)
    assert (status, data, record.key) == (201, {"order": "op_1"}, "42")
    assert call(ds, "orders", "PUT", "/orders", order)[2].outcome is Outcome.REPLAYED
    assert call(ds, "orders", "PUT", "/orders", {**order, "item": "pen"})[0] == 422
    # Without the field, or with it null, each is a new operation.
    assert [call(ds, "orders", "PUT", "/orders", body)[2].op
            for body in ({"item": "pen"}, {"client_order_id": None})] == ["op_2", "op_3"]
    assert ds.applied("orders") == 3


def test_no_dedup_applies_every_create() -> None:
    ds = Downstream(SERVICES)
    body = {"line": "x"}
    records = [call(ds, "log", "POST", "/entries", body, {"Idempotency-Key": "k"})[2]
               for _ in range(2)]
    assert [(r.op, r.outcome) for r in records] == [("op_1", Outcome.APPLIED),
                                                    ("op_2", Outcome.APPLIED)]


def test_status_query_by_key_answers_the_stored_response_or_404() -> None:
    ds = Downstream(SERVICES)
    created = send_mail(ds, "a/b c")[1]
    status, data, record = call(ds, "mail", "GET", "/messages/" + quote("a/b c", safe=""))
    assert (status, data) == (200, created)
    assert (record.outcome, record.key, record.op) == (Outcome.STATUS, "a/b c", "op_1")
    status, data, record = call(ds, "mail", "GET", "/messages/nope")
    assert (status, record.outcome, record.op) == (404, Outcome.NOT_FOUND, None)
    assert "nope" in data["error"]["message"]


def test_status_query_by_id_answers_the_stored_response_or_404() -> None:
    ds = Downstream(SERVICES)
    created = call(ds, "orders", "PUT", "/orders", {"client_order_id": "c1"})[1]
    assert call(ds, "orders", "GET", f"/orders/{created['order']}/status")[:2] == (200, created)
    assert call(ds, "orders", "GET", "/orders/op_2/status")[0] == 404
    assert call(ds, "log", "GET", "/entries/op_1")[0] == 404  # ids are per service


@pytest.mark.parametrize(("method", "path", "status", "outcome"), [
    ("GET", "/elsewhere", 404, Outcome.NO_ROUTE),
    ("POST", "/messages/extra/segment", 404, Outcome.NO_ROUTE),
    ("GET", "/messages", 405, Outcome.REFUSED),
    ("DELETE", "/messages/k1", 405, Outcome.REFUSED),
    ("POST", "", 404, Outcome.NO_ROUTE),
])
def test_other_requests_are_404_or_405_and_apply_nothing(method: str, path: str, status: int,
                                                         outcome: Outcome) -> None:
    ds = Downstream(SERVICES)
    got, data, record = call(ds, "mail", method, path, EMAIL)
    assert (got, record.outcome, record.op) == (status, outcome, None)
    assert "error" in data
    assert ds.applied("mail") == 0


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]", b'"text"', b'{"a": NaN}',
                                 b"\xff\xfe{", b'{"a": ' + b"[" * 100 + b"]" * 100 + b"}",
                                 b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"])
def test_a_create_without_a_json_object_body_is_refused(raw: bytes) -> None:
    ds = Downstream(SERVICES)
    status, data, record = call(ds, "mail", "POST", "/messages", raw=raw,
                                headers={"Idempotency-Key": "k1"})
    assert (status, record.outcome, record.op, record.key) == (400, Outcome.REFUSED, None, "k1")
    assert data["error"]["type"] == "invalid_request_error"
    assert ds.applied("mail") == 0


@pytest.mark.parametrize("value", [True, [1], {"a": 1}])
def test_a_body_key_that_is_no_string_or_number_is_refused(value: Any) -> None:
    ds = Downstream(SERVICES)
    status, _, record = call(ds, "orders", "PUT", "/orders", {"client_order_id": value})
    assert (status, record.outcome) == (400, Outcome.REFUSED)
    assert ds.applied("orders") == 0


def test_records_number_every_request_of_the_case_in_arrival_order() -> None:
    ds = Downstream(SERVICES)
    made = [send_mail(ds, "k1")[2], call(ds, "log", "POST", "/entries", {"x": 1})[2],
            call(ds, "mail", "GET", "/nowhere")[2], send_mail(ds, "k1")[2]]
    assert [r.seq for r in made] == [1, 2, 3, 4]
    assert ds.records() == made
    ds.records().clear()  # a copy
    assert ds.records() == made
    assert Downstream(SERVICES).records() == []  # another case starts empty


def test_the_same_requests_in_the_same_order_give_the_same_records_and_answers() -> None:
    def run() -> tuple[list[Any], list[DownstreamRecord]]:
        ds = Downstream(SERVICES)
        answers = [send_mail(ds, "k1")[:2], send_mail(ds, None)[:2], send_mail(ds, "k1")[:2],
                   call(ds, "orders", "PUT", "/orders", {"client_order_id": "c"})[:2],
                   call(ds, "mail", "GET", "/messages/k1")[:2]]
        return answers, ds.records()

    assert run() == run()


def test_a_service_declared_twice_or_unknown_is_an_error() -> None:
    with pytest.raises(ValueError, match="twice"):
        Downstream((MAIL, MAIL))
    with pytest.raises(KeyError):
        Downstream(SERVICES).handle("nope", "GET", "/", {}, b"")


# -- over HTTP ------------------------------------------------------------------------------------
CASE = "case a/1"  # quoted in the URL


@pytest.fixture
def fake() -> Iterator[FakeDownstream]:
    with FakeDownstream() as d:
        yield d


def request(url: str, body: Any = None, headers: Mapping[str, str] | None = None,
            method: str | None = None, raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers=dict(headers or {}), method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.loads(err.read())


def test_it_binds_loopback_only(fake: FakeDownstream) -> None:
    assert fake.address[0] == "127.0.0.1"
    assert fake.register(CASE, [MAIL])["mail"].startswith(f"http://127.0.0.1:{fake.port}/")


def test_over_http_a_key_applies_once_and_a_status_query_finds_it(fake: FakeDownstream) -> None:
    urls = fake.register(CASE, SERVICES)
    assert urls == {s.name: f"http://127.0.0.1:{fake.port}/{quote(CASE, safe='')}/{s.name}"
                    for s in SERVICES}
    first = request(urls["mail"] + "/messages", EMAIL, {"Idempotency-Key": "k1"})
    assert first == (201, rendered(MAIL_RESPONSE, "op_1", "k1"))
    assert request(urls["mail"] + "/messages", EMAIL, {"Idempotency-Key": "k1"}) == first
    assert request(urls["mail"] + "/messages", {"x": 1}, {"Idempotency-Key": "k1"})[0] == 422
    assert request(urls["mail"] + "/messages/k1?verbose=1") == (200, first[1])
    assert request(urls["log"] + "/entries/op_1")[0] == 404
    assert [(r.seq, r.service, r.outcome) for r in fake.records(CASE)] == [
        (1, "mail", Outcome.APPLIED), (2, "mail", Outcome.REPLAYED),
        (3, "mail", Outcome.CONFLICT), (4, "mail", Outcome.STATUS),
        (5, "log", Outcome.NOT_FOUND)]
    assert fake.applied(CASE, "mail") == 1


def test_a_repeated_header_keeps_its_last_value(fake: FakeDownstream) -> None:
    fake.register("c", [MAIL])
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
    try:
        body = json.dumps(EMAIL).encode()
        conn.putrequest("POST", "/c/mail/messages")
        conn.putheader("Idempotency-Key", "first")
        conn.putheader("idempotency-key", "last")
        conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        assert conn.getresponse().status == 201
    finally:
        conn.close()
    assert [r.key for r in fake.records("c")] == ["last"]


def test_a_body_over_the_cap_is_413_and_not_recorded(fake: FakeDownstream) -> None:
    url = fake.register("c", [LOG])["log"] + "/entries"
    # Exactly the cap is taken; one byte more is not.
    filler = server.MAX_BODY - len(json.dumps({"pad": ""}))
    fits = json.dumps({"pad": "x" * filler}).encode()
    assert len(fits) == server.MAX_BODY
    assert request(url, raw=fits)[0] == 201
    status, data = request(url, raw=fits[:-2] + b'x"}')
    assert status == 413
    assert str(server.MAX_BODY) in data["error"]["message"]
    assert [r.outcome for r in fake.records("c")] == [Outcome.APPLIED]


def test_an_unknown_case_or_service_is_404_and_recorded_nowhere(fake: FakeDownstream) -> None:
    fake.register("c", [MAIL])
    root = f"http://127.0.0.1:{fake.port}"
    for path in ("/other/mail/messages", "/c/orders/orders", "/c", "/"):
        status, data = request(root + path, EMAIL, {"Idempotency-Key": "k1"})
        assert status == 404, path
        assert "error" in data
    assert fake.records("c") == []
    with pytest.raises(KeyError):
        fake.records("other")


def test_records_are_per_case(fake: FakeDownstream) -> None:
    a, b = fake.register("a", [MAIL])["mail"], fake.register("b", [MAIL])["mail"]
    request(a + "/messages", EMAIL, {"Idempotency-Key": "k1"})
    request(b + "/messages", EMAIL, {"Idempotency-Key": "k1"})
    request(b + "/messages", EMAIL, {"Idempotency-Key": "k2"})
    # The same key in another case is another case's operation.
    assert [(r.seq, r.op) for r in fake.records("a")] == [(1, "op_1")]
    assert [(r.seq, r.op) for r in fake.records("b")] == [(1, "op_1"), (2, "op_2")]
    fake.forget("a")
    assert request(a + "/messages", EMAIL)[0] == 404
    with pytest.raises(ValueError, match="already"):
        fake.register("b", [MAIL])


def test_no_request_can_alter_an_earlier_record(fake: FakeDownstream) -> None:
    url = fake.register("c", [MAIL, LOG])["mail"]
    request(url + "/messages", EMAIL, {"Idempotency-Key": "k1"})
    request(url + "/messages", EMAIL)
    before = [r.to_json() for r in fake.records("c")]
    # Requests that try: the same key with another body, fields and headers named like the
    # record's, a replay, status queries, methods the service lacks.
    hostile = {"seq": 1, "outcome": "replayed", "op": "op_1", "status": 201, "key": None}
    request(url + "/messages", hostile, {"Idempotency-Key": "k1", "X-Seq": "1", "Op": "op_9"})
    request(url + "/messages", EMAIL, {"Idempotency-Key": "k1"})
    request(url + "/messages/k1", method="DELETE")
    request(url + "/messages/k1", hostile, method="PUT")
    returned = fake.records("c")
    returned.clear()
    after = fake.records("c")
    assert [r.to_json() for r in after[: len(before)]] == before
    assert [r.seq for r in after] == list(range(1, len(after) + 1))
    assert fake.applied("c", "mail") == 2


def test_a_kept_alive_connection_serves_two_requests(fake: FakeDownstream) -> None:
    fake.register("c", [MAIL])
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
    try:
        body = json.dumps(EMAIL)
        conn.request("POST", "/c/mail/messages", body, {"Idempotency-Key": "k1",
                                                       "Content-Type": "application/json"})
        first = conn.getresponse()
        first_body = first.read()
        sock = conn.sock
        conn.request("GET", "/c/mail/messages/k1")
        second = conn.getresponse()
        assert (first.status, second.status) == (201, 200)
        assert json.loads(second.read()) == json.loads(first_body)
        assert sock is not None
        assert conn.sock is sock, "the second request reused the connection"
    finally:
        conn.close()
    assert [r.outcome for r in fake.records("c")] == [Outcome.APPLIED, Outcome.STATUS]


def test_a_chunked_body_over_the_cap_is_413_and_not_recorded(fake: FakeDownstream) -> None:
    fake.register("c", [LOG])
    with socket.create_connection(("127.0.0.1", fake.port), timeout=5) as sock:
        # The size line alone is refused: the chunk is never read.
        sock.sendall(b"POST /c/log/entries HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + f"{server.MAX_BODY + 1:x}\r\n".encode())
        assert sock.recv(64).split(b" ")[1] == b"413"
    assert fake.records("c") == []
