"""Faults at downstream requests: what the fake does at an armed request; enumeration, ids, checks."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from crashmatrix.fakes import Downstream, FakeDownstream
from crashmatrix.fakes.downstream import Fate, Injection, Outcome
from crashmatrix.harness.enumeration import (
    crash_loop_extension,
    downstream_steps,
    extensions,
    single_crash_cases,
    steps_from_trace,
)
from crashmatrix.harness.execution.case_services import injection_of
from crashmatrix.harness.faults import downstream as faults
from crashmatrix.harness.faults.interface import ReplyFate
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.registry import FAULTS, check_faults
from crashmatrix.harness.records.case import Case, CaseIdError, CrashStep
from crashmatrix.scenarios.model import Dedup, Endpoint, FieldError, Service

MAIL = Service(name="mail", create=Endpoint(path="/messages", response={"id": "{id}"}),
               dedup=Dedup.parse("header:Idempotency-Key"), status="/messages/{key}")
BY_REF = Service(name="mail", create=Endpoint(path="/messages", response={"id": "{id}"}),
                 reference="client_ref", status="/messages/by-ref/{ref}")
EMAIL = json.dumps({"to": "a@example.com"}).encode()
DOWNSTREAM_FAULTS = (faults.REPLY_LOST, faults.KILL_AFTER_APPLY, faults.ERROR_AFTER_APPLY,
                     faults.ERROR_BEFORE_APPLY, faults.TIMEOUT)


def send(ds: Downstream, key: str = "k1") -> tuple[int | None, Injection | None, Outcome, str | None]:
    status, _, record, injection = ds.handle("mail", "POST", "/messages", {"idempotency-key": key}, EMAIL)
    return status, injection, record.outcome, record.fault


# -- at the fake, without sockets ----------------------------------------------------------------
@pytest.mark.parametrize("fault", DOWNSTREAM_FAULTS, ids=lambda f: f.name)
def test_an_armed_fault_acts_at_its_request_only_and_is_recorded(fault: faults.DownstreamFault) -> None:
    ds = Downstream([MAIL])
    ds.arm(2, injection_of(fault))
    assert send(ds, "a") == (201, None, Outcome.APPLIED, None)  # request 1: not armed
    status, injection, outcome, recorded = send(ds, "b")
    assert injection == injection_of(fault)
    assert recorded == fault.name
    # Applied or not, as the fault says; then no reply, or the fault's 5xx.
    assert outcome is (Outcome.APPLIED if fault.applies else Outcome.FAILED)
    assert ds.applied("mail") == 1 + fault.applies
    assert status == (fault.status if fault.fate is ReplyFate.ERROR else None)
    assert ds.disarm() == ds.records()[1]
    assert send(ds, "c")[1] is None  # disarmed: the next request is answered normally
    assert ds.disarm() is None


def test_a_retry_after_an_unapplied_5xx_applies_and_after_an_applied_one_replays() -> None:
    ds = Downstream([MAIL])
    ds.arm(1, injection_of(faults.ERROR_BEFORE_APPLY))
    assert send(ds)[0] == 503
    assert send(ds)[2] is Outcome.APPLIED  # the key was never stored: nothing had applied
    ds = Downstream([MAIL])
    ds.arm(1, injection_of(faults.ERROR_AFTER_APPLY))
    assert send(ds)[0] == 500
    assert send(ds)[2] is Outcome.REPLAYED


def test_a_status_query_by_reference_finds_the_first_operation_and_dedups_nothing() -> None:
    ds = Downstream([BY_REF])
    body = json.dumps({"to": "a", "client_ref": "r1"}).encode()
    for _ in range(2):
        ds.handle("mail", "POST", "/messages", {}, body)
    assert ds.applied("mail") == 2  # a reference is no key: both sends applied
    status, data, record, _ = ds.handle("mail", "GET", "/messages/by-ref/r1", {}, b"")
    assert (status, json.loads(data), record.outcome, record.kind) == (200, {"id": "op_1"}, Outcome.STATUS,
                                                                       "status")
    assert ds.handle("mail", "GET", "/messages/by-ref/r2", {}, b"")[0] == 404


@pytest.mark.parametrize("fate", list(ReplyFate))
def test_every_fate_a_fault_kind_names_is_one_the_fake_carries_out(fate: ReplyFate) -> None:
    assert Fate(fate.value).value == fate.value


def test_a_reference_query_needs_the_reference_field() -> None:
    with pytest.raises(FieldError, match="needs reference"):
        Service(name="mail", create=Endpoint(path="/m"), status="/m/{ref}")


# -- over HTTP ----------------------------------------------------------------------------------
@pytest.fixture
def fake() -> Iterator[FakeDownstream]:
    with FakeDownstream() as d:
        yield d


def post(port: int, path: str, timeout: float = 5.0) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, EMAIL, {"Idempotency-Key": "k", "Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()


def test_reply_lost_resets_the_connection_after_applying(fake: FakeDownstream) -> None:
    fake.register("c", [MAIL])
    fake.arm("c", 1, injection_of(faults.REPLY_LOST))
    with pytest.raises((ConnectionResetError, http.client.RemoteDisconnected)):
        post(fake.port, "/c/mail/messages")
    assert fake.applied("c", "mail") == 1
    assert post(fake.port, "/c/mail/messages") == 201  # the retry replays


def test_timeout_holds_the_reply_until_the_client_gives_up(fake: FakeDownstream) -> None:
    fake.register("c", [MAIL])
    fake.arm("c", 1, injection_of(faults.TIMEOUT))
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        post(fake.port, "/c/mail/messages", timeout=0.3)
    assert time.monotonic() - started >= 0.3
    assert fake.applied("c", "mail") == 1
    assert post(fake.port, "/c/mail/messages") == 201  # the loop still serves everyone else


def test_kill_after_apply_calls_the_kill_before_closing_unanswered(fake: FakeDownstream) -> None:
    fake.register("c", [MAIL])
    killed = threading.Event()
    fake.arm("c", 1, injection_of(faults.KILL_AFTER_APPLY), killed.set)
    with pytest.raises((ConnectionResetError, http.client.RemoteDisconnected)):
        post(fake.port, "/c/mail/messages")
    assert killed.is_set()
    fired = fake.disarm("c")
    assert fired is not None
    assert (fired.outcome, fired.status, fired.fault) == (Outcome.APPLIED, None, "kill-after-apply")


def test_an_error_fault_answers_its_status_over_http(fake: FakeDownstream) -> None:
    fake.register("c", [MAIL])
    fake.arm("c", 1, injection_of(faults.ERROR_AFTER_APPLY))
    assert post(fake.port, "/c/mail/messages") == 500
    sock = socket.create_connection(fake.address)  # the loop is alive
    sock.close()


# -- enumeration, case ids, the registry ---------------------------------------------------------
def test_downstream_faults_are_enumerated_at_requests_and_never_at_probe_events() -> None:
    everything = [KILL, *DOWNSTREAM_FAULTS]
    at_events = steps_from_trace(["create:mail", "effect.before:x"], everything)
    assert [s.fault for s in at_events] == ["kill", "kill"]
    steps = downstream_steps(["create:mail", "status:mail", "other:mail"], everything)
    assert [s.token() for s in steps] == [
        "d01:create:mail/reply-lost", "d01:create:mail/kill-after-apply", "d01:create:mail/error-after-apply",
        "d01:create:mail/error-before-apply", "d01:create:mail/timeout",
        "d02:status:mail/reply-lost", "d02:status:mail/error-before-apply"]
    cases = single_crash_cases("s", ["effect.before:x"], everything, ["create:mail"])
    assert [c.case_id for c in cases][:2] == ["s/01:effect.before:x/kill", "s/d01:create:mail/reply-lost"]


def test_a_deeper_schedule_crashes_at_the_finishing_incarnations_requests() -> None:
    parent = Case("s", (CrashStep(1, "create", "mail", "kill-after-apply", downstream=True),))
    children = extensions(parent, [["a:b"], ["c:d"]], [KILL, faults.REPLY_LOST],
                          [["create:mail"], ["create:mail", "create:shop"]])
    assert [c.case_id for c in children] == [
        "s/d01:create:mail/kill-after-apply+01:c:d/kill",
        "s/d01:create:mail/kill-after-apply+d01:create:mail/reply-lost",
        "s/d01:create:mail/kill-after-apply+d02:create:shop/reply-lost"]


def test_a_crash_loop_repeats_a_downstream_step_at_the_same_request_of_the_recovery() -> None:
    parent = Case("s", (CrashStep(1, "create", "mail", "kill-after-apply", downstream=True),))
    requests = [["create:mail"], ["status:mail", "create:mail"]]
    loop = crash_loop_extension(parent, [["a:b"], ["c:d"]], 3, requests)
    assert loop is not None
    assert loop.case_id == "s/d01:create:mail/kill-after-apply+d02:create:mail/kill-after-apply"
    assert crash_loop_extension(parent, [["a:b"], ["c:d"]], 3, [["create:mail"], ["status:mail"]]) is None


def test_a_downstream_case_id_round_trips_and_its_fault_must_act_at_requests() -> None:
    case = Case.parse("refund/d02:create:mail/reply-lost+03:commit.after:x/kill")
    assert case.schedule[0] == CrashStep(2, "create", "mail", "reply-lost", downstream=True)
    assert case.case_id == "refund/d02:create:mail/reply-lost+03:commit.after:x/kill"

    class Agent:
        name = "a"
        capabilities = frozenset(KILL.requires)

    check_faults(case, Agent(), FAULTS.all())  # type: ignore[arg-type]
    for wrong in ("s/d01:create:mail/kill", "s/01:effect.before:x/reply-lost"):
        with pytest.raises(CaseIdError, match="acts at"):
            check_faults(Case.parse(wrong), Agent(), FAULTS.all())  # type: ignore[arg-type]
