"""The fake provider's limits: one client's big, costly or stalled body holds up no other client.

Every check is an order of events or an outcome, never a duration: a bound below is only how
long a test waits for something that must happen (before the fix it never did, or much later).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from crashmatrix.fakes import FakeProvider, http1, server
from crashmatrix.scenarios import load_builtin

KEY = "c"
PATH = f"/{KEY}/v1/chat/completions"
TASK = "Append the line '修复登录超时' to CHANGELOG.md, then run the tests and report the result."
SMALL = json.dumps({"model": "m", "messages": [{"role": "user", "content": TASK}]}).encode()
WAIT_S = 20.0  # how long to wait for what must come: far past any timeout the fake is given


def bigflat(size: int) -> bytes:
    """A valid chat request of about `size` bytes, most of it a flat list of empty lists (the
    hostile kit's `bigflat`: cheap to send, costly to parse)."""
    head = b'{"model":"m","messages":[{"role":"user","content":"x"}],"junk":['
    return head + b"[]," * ((size - len(head)) // 3) + b"[]]}"


def head(length: int, *extra: str) -> bytes:
    lines = [f"POST {PATH} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {length}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def connect(provider: FakeProvider) -> socket.socket:
    return socket.create_connection(("127.0.0.1", provider.port), timeout=WAIT_S)


def read_response(sock: socket.socket, pending: bytearray | None = None) -> tuple[int, bytes]:
    """One response's status and body (by its Content-Length; the connection may stay open).
    Bytes past it, the next response's, stay in `pending` for the next call."""
    data = bytearray() if pending is None else pending
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        assert piece, f"the connection closed without a response: {bytes(data)!r}"
        data += piece
    end = data.index(b"\r\n\r\n") + 4
    top = bytes(data[:end]).decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in top[1:] if line)
    length = int(fields["Content-Length"])
    while len(data) < end + length:
        piece = sock.recv(65536)
        assert piece, "the connection closed inside a response"
        data += piece
    body = bytes(data[end : end + length])
    del data[: end + length]
    return int(top[0].split(" ", 2)[1]), body


def small_request(provider: FakeProvider) -> tuple[int, bytes]:
    with connect(provider) as sock:
        sock.sendall(head(len(SMALL)) + SMALL)
        return read_response(sock)


def eventually(check: Callable[[], bool]) -> bool:
    until = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > until:
            return False
        time.sleep(0.02)
    return True


def error_of(body: bytes) -> str:
    return str(json.loads(body)["error"]["message"])


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        p.register(KEY, load_builtin()["changelog-fast"])
        yield p


# -- one big body -----------------------------------------------------------------------------

def test_a_34_mb_body_gets_413_before_it_is_uploaded_while_a_small_request_is_served(
        provider: FakeProvider) -> None:
    body = bigflat(34 * 1024 * 1024)
    with connect(provider) as big:
        # Only its head and its first MiB: the answer must come with the rest never sent. Before
        # the fix the fake accepted 34 MB and waited for the body (then parsed it for 14-38 s).
        big.sendall(head(len(body)) + body[: 1 << 20])
        assert small_request(provider)[0] == 200
        status, answer = read_response(big)
    assert status == 413
    assert f"larger than {http1.MAX_BODY} bytes (8 MiB)" in error_of(answer)
    assert [r.status for r in provider.requests(KEY)] == [200], "the big one reached no case"
    assert eventually(lambda: provider.held_bytes == 0)


def test_a_body_of_millions_of_tiny_arrays_is_refused_before_it_is_parsed(
        provider: FakeProvider) -> None:
    # Under the byte limit, but 2.4 million lists: the parse alone would stall every client.
    body = bigflat(7 * 1024 * 1024)
    assert body.count(b"[") > 2 * server.MAX_JSON_CONTAINERS
    with connect(provider) as sock:
        sock.sendall(head(len(body)) + body)
        status, answer = read_response(sock)
    assert status == 413
    assert f"more than {server.MAX_JSON_CONTAINERS} JSON arrays and objects" in error_of(answer)
    assert provider.requests(KEY) == []


def test_brackets_inside_strings_are_text_not_values(provider: FakeProvider) -> None:
    # A file full of brackets read into the history is not a costly body: it is served.
    content = TASK + "[{" * server.MAX_JSON_CONTAINERS
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode()
    with connect(provider) as sock:
        sock.sendall(head(len(body)) + body)
        assert read_response(sock)[0] == 200
    assert [r.rule for r in provider.requests(KEY)] == ["start"]


# -- a big body is handled off the loop -------------------------------------------------------

class GatedProvider(FakeProvider):
    """Its handler waits at a gate on a big body: as long as parsing a costly one would."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.gate = threading.Event(), threading.Event()

    def _answer(self, request: http1.Request) -> http1.Reply:
        if len(request.body) > 100_000:
            self.entered.set()
            self.gate.wait(WAIT_S * 2)
        return super()._answer(request)


def big_request(size: int) -> bytes:
    return json.dumps({"model": "m", "messages": [
        {"role": "system", "content": "s" * size}, {"role": "user", "content": TASK}]}).encode()


def test_a_big_body_being_handled_holds_up_no_other_client() -> None:
    with GatedProvider() as provider:
        provider.register(KEY, load_builtin()["changelog-fast"])
        body = big_request(1 << 20)
        with connect(provider) as big:
            try:
                big.sendall(head(len(body)) + body)
                assert provider.entered.wait(WAIT_S)
                # The big request's handler is still running: before the fix it ran on the
                # loop, and this request waited for it.
                assert small_request(provider)[0] == 200
                assert not provider.gate.is_set()
            finally:
                provider.gate.set()
            assert read_response(big)[0] == 200
        records = provider.requests(KEY)
    assert [len(json.dumps(r.messages)) > 1 << 20 for r in records] == [False, True]
    assert [r.rule for r in records] == ["start", "start"]


def test_a_big_request_keeps_its_connection_and_is_answered_after_the_client_shuts_its_side(
        provider: FakeProvider) -> None:
    body = big_request(1 << 20)
    with connect(provider) as sock:
        sock.sendall(head(len(body)) + body)
        assert read_response(sock)[0] == 200
        # The same connection serves the next request, big again; then the client is done
        # sending (EOF while the worker has it) and still gets its answer.
        sock.sendall(head(len(body)) + body + head(len(SMALL)) + SMALL)
        sock.shutdown(socket.SHUT_WR)
        pending = bytearray()
        assert read_response(sock, pending)[0] == 200
        assert read_response(sock, pending)[0] == 200
        assert not pending
        assert sock.recv(1) == b""
    assert len(provider.requests(KEY)) == 3
    assert eventually(lambda: provider.held_bytes == 0)


class FailingProvider(FakeProvider):
    """Its handler raises on a big body (a bug in the fake, say)."""

    def _answer(self, request: http1.Request) -> http1.Reply:
        if len(request.body) > 100_000:
            raise RuntimeError("boom")
        return super()._answer(request)


def test_a_handler_failing_on_the_worker_ends_only_its_own_connection() -> None:
    with FailingProvider() as provider:
        provider.register(KEY, load_builtin()["changelog-fast"])
        body = big_request(1 << 20)
        with connect(provider) as sock:
            sock.sendall(head(len(body)) + body)
            assert sock.recv(1) == b"", "closed unanswered, as a failing handler on the loop is"
        assert small_request(provider)[0] == 200
        assert eventually(lambda: provider.held_bytes == 0)


# -- stalled bodies ---------------------------------------------------------------------------

def test_a_stalled_half_body_is_dropped_after_the_timeout_and_its_bytes_released() -> None:
    # The whole-request deadline is far off: only the stall (no byte for 1 s) ends it.
    with FakeProvider(socket_timeout_s=1.0, request_deadline_s=600.0) as provider:
        provider.register(KEY, load_builtin()["changelog-fast"])
        length = 2 << 20
        with connect(provider) as sock:
            sock.sendall(head(length) + bigflat(length)[: length // 2])
            assert eventually(lambda: provider.held_bytes == length)
            status, answer = read_response(sock)  # the client sends nothing more
            assert status == 408
            assert "not received in time" in error_of(answer)
            assert provider.held_bytes == 0, "answered, but what it sent is still held"
        assert provider.requests(KEY) == []
        assert small_request(provider)[0] == 200


def test_bodies_held_together_past_the_budget_get_503_and_small_requests_still_pass() -> None:
    mib = 1 << 20
    # Timeouts far off: the stalled bodies must still be held when the others come.
    with FakeProvider(max_body=mib, max_held=2 * mib, socket_timeout_s=300.0,
                      request_deadline_s=600.0) as provider:
        provider.register(KEY, load_builtin()["changelog-fast"])
        with contextlib.ExitStack() as stack:
            stalled = [stack.enter_context(connect(provider)) for _ in range(2)]
            for sock in stalled:
                sock.sendall(head(mib) + b"[" * 1000)  # announced, a little sent, then silence
            assert eventually(lambda: provider.held_bytes == 2 * mib)
            with connect(provider) as third:
                third.sendall(head(mib))
                status, answer = read_response(third)
            assert status == 503
            assert f"{2 * mib} bytes (2 MiB)" in error_of(answer)
            with connect(provider) as chunked:
                chunked.sendall(head(0).replace(b"Content-Length: 0",
                                                 b"Transfer-Encoding: chunked")
                                + f"{mib:x}\r\n".encode())
                assert read_response(chunked)[0] == 503
            # An ordinary request is never refused for what others hold.
            assert small_request(provider)[0] == 200
        # The stalled clients hung up: what they held is given back.
        assert eventually(lambda: provider.held_bytes == 0)
        assert [r.status for r in provider.requests(KEY)] == [200]


def test_held_bytes_is_zero_when_idle_and_after_a_request(provider: FakeProvider) -> None:
    assert provider.held_bytes == 0
    assert small_request(provider)[0] == 200
    assert eventually(lambda: provider.held_bytes == 0)


def test_the_limits_have_documented_defaults_and_can_be_set() -> None:
    # The 413 names the limit; a caller that needs another sets it (FakeProvider(max_body=...)).
    assert http1.MAX_BODY == 8 * 1024 * 1024
    assert http1.MAX_HELD >= 4 * http1.MAX_BODY
    fields: dict[str, Any] = {"max_body": 1 << 20, "max_held": 1 << 22,
                              "socket_timeout_s": 1.0, "request_deadline_s": 2.0}
    with FakeProvider(**fields) as provider:
        body = bigflat((1 << 20) + 10)
        with connect(provider) as sock:
            sock.sendall(head(len(body)))
            status, answer = read_response(sock)
    assert status == 413
    assert "larger than 1048576 bytes (1 MiB)" in error_of(answer)
