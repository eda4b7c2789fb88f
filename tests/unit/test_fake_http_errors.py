"""The fake provider's HTTP layer over raw sockets: bad framing gets the status a real service gives."""

from __future__ import annotations

import contextlib
import json
import select
import selectors
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from crashmatrix.fakes import FakeProvider, api_errors, http1
from crashmatrix.scenarios import load_builtin

KEY = "c"
VALID = json.dumps({"model": "m", "messages": [{"role": "system", "content": "s"},
                                               {"role": "user", "content": "t"}]}).encode()


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        p.register(KEY, load_builtin()["finished"])
        yield p


def head(*headers: str) -> bytes:
    # Connection: close, so every answer ends at EOF (the keep-alive tests are at the end).
    lines = [f"POST /{KEY}/v1/chat/completions HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
             *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_to_eof(sock: socket.socket) -> bytes:
    """Everything the server sends before it closes (it closes after every response). A reset
    after the answer (the server closed with bytes of ours unread) ends the answer too."""
    out = bytearray()
    while True:
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            return bytes(out)
        if not piece:
            return bytes(out)
        out += piece


def exchange(provider: FakeProvider, data: bytes, *, shut: bool = False) -> bytes:
    with socket.create_connection(("127.0.0.1", provider.port), timeout=2.0) as sock:
        sock.sendall(data)
        if shut:
            sock.shutdown(socket.SHUT_WR)
        return read_to_eof(sock)


def response_of(data: bytes) -> tuple[int, dict[str, Any]]:
    assert data, "the connection was closed without a response"
    status_line, _, body = data.partition(b"\r\n\r\n")
    return int(status_line.split(b" ", 2)[1]), json.loads(body)


def assert_error(data: bytes, status: int, says: str) -> None:
    got, body = response_of(data)
    assert got == status, body
    assert body["error"]["type"] == "invalid_request_error"
    assert says in body["error"]["message"]


# -- Content-Length -------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["abc", "-1", "1_0", "+2", "2, 3", ""])
def test_a_malformed_content_length_is_a_400(provider: FakeProvider, value: str) -> None:
    data = exchange(provider, head(f"Content-Length: {value}") + b"{}")
    assert_error(data, 400, "invalid Content-Length header")
    assert provider.requests(KEY) == [], "refused before it reached the case"


def test_repeated_identical_content_lengths_are_one_length(provider: FakeProvider) -> None:
    status, _ = response_of(exchange(provider, head(f"Content-Length: {len(VALID)}, {len(VALID)}")
                                     + VALID))
    assert status == 200


def test_a_post_without_a_length_is_411(provider: FakeProvider) -> None:
    assert_error(exchange(provider, head()), 411, "Content-Length")
    assert provider.requests(KEY) == []


@pytest.mark.parametrize("value", [str(http1.MAX_BODY + 1), "9" * 5000])
def test_a_body_over_the_limit_is_413_from_the_header_alone(provider: FakeProvider,
                                                            value: str) -> None:
    # No body is sent: the answer must come from the header, before any read of the body.
    started = time.monotonic()
    assert_error(exchange(provider, head(f"Content-Length: {value}")), 413,
                 f"larger than {http1.MAX_BODY} bytes")
    assert time.monotonic() - started < 1.0


def test_a_body_cut_short_is_neither_answered_nor_recorded(provider: FakeProvider) -> None:
    # The client hung up (a killed agent) after 2 of the 100 bytes it announced.
    assert exchange(provider, head("Content-Length: 100") + b"{}", shut=True) == b""
    assert provider.requests(KEY) == []


# -- chunked bodies -------------------------------------------------------------------------

def test_a_chunked_body_is_read(provider: FakeProvider) -> None:
    first, second = VALID[:10], VALID[10:]
    body = (f"{len(first):x}\r\n".encode() + first + b"\r\n"
            + f"{len(second):X};ext=1\r\n".encode() + second + b"\r\n0\r\nX-Trailer: t\r\n\r\n")
    status, reply = response_of(exchange(provider, head("Transfer-Encoding: chunked") + body))
    assert status == 200, reply
    assert [r.rule for r in provider.requests(KEY)] == ["start"]


@pytest.mark.parametrize(("body", "status", "says"), [
    (b"FFFFFFFFFF\r\n", 413, "larger than"),  # refused from the size line, before the chunk
    (b"zz\r\n", 400, "invalid chunk size"),
    (b"2\r\n{}XX0\r\n\r\n", 400, "does not end where its size says"),
])
def test_bad_chunked_framing(provider: FakeProvider, body: bytes, status: int, says: str) -> None:
    assert_error(exchange(provider, head("Transfer-Encoding: chunked") + body), status, says)


def test_chunked_must_be_the_final_transfer_coding(provider: FakeProvider) -> None:
    data = exchange(provider, head("Transfer-Encoding: chunked, gzip") + b"{}", shut=True)
    assert_error(data, 400, "unsupported Transfer-Encoding")


# -- JSON -----------------------------------------------------------------------------------

def test_deeply_nested_json_is_a_400_not_a_dropped_connection(provider: FakeProvider) -> None:
    body = b"[" * 100_000
    data = exchange(provider, head(f"Content-Length: {len(body)}") + body)
    assert_error(data, 400, api_errors.invalid_json().message)
    assert [r.status for r in provider.requests(KEY)] == [400]


def nested_request(depth: int) -> bytes:
    content = "[" * depth + "]" * depth
    return ('{"model": "m", "messages": [{"role": "user", "content": ' + content + "}]}").encode()


def test_no_nesting_depth_near_the_recursion_limit_drops_the_connection(
        provider: FakeProvider) -> None:
    # Just under the limit a body parses, and then broke the handler when the fake encoded it
    # again deeper in the stack: the connection dropped. Every depth must get an answer.
    limit = sys.getrecursionlimit()
    for depth in range(limit - 80, limit + 10):
        body = nested_request(depth)
        data = exchange(provider, head(f"Content-Length: {len(body)}") + body)
        assert data, f"nesting {depth} deep dropped the connection"
        assert_error(data, 400, api_errors.invalid_json().message)


def test_json_nested_a_few_dozen_levels_is_served(provider: FakeProvider) -> None:
    body = nested_request(40)
    status, reply = response_of(exchange(provider, head(f"Content-Length: {len(body)}") + body))
    assert status == 200, reply


# -- slow clients ---------------------------------------------------------------------------

def drip(sock: socket.socket, seconds: float) -> bytes | None:
    """Send a byte every 0.1 s until the server answers or closes (its bytes) or `seconds`
    pass (None: the server is still waiting for us)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        readable, _, _ = select.select([sock], [], [], 0.1)
        if readable:
            return read_to_eof(sock)
        # Closed under us: the next select reads what the server sent.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.send(b" ")
    return None


def test_a_body_dripped_a_byte_at_a_time_gets_408_at_the_deadline(
        provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "REQUEST_DEADLINE_S", 0.35)
    with socket.create_connection(("127.0.0.1", provider.port), timeout=2.0) as sock:
        sock.sendall(head("Content-Length: 1000") + b"{")
        started = time.monotonic()
        # Each byte comes well within the 5 s socket timeout: only a total deadline ends this.
        data = drip(sock, 2.0)
        elapsed = time.monotonic() - started
    assert data is not None, "the server still waits: a dripping client holds a thread forever"
    assert_error(data, 408, "not received in time")
    assert elapsed < 1.5
    assert provider.requests(KEY) == []


def test_headers_dripped_a_byte_at_a_time_are_cut_off_at_the_deadline(
        provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "REQUEST_DEADLINE_S", 0.35)
    with socket.create_connection(("127.0.0.1", provider.port), timeout=2.0) as sock:
        sock.sendall(f"POST /{KEY}/v1/chat/completions HTTP/1.1\r\nX-Slow: ".encode())
        data = drip(sock, 2.0)
    # No request was ever complete, so there is nothing to answer: the connection is closed.
    assert data == b"", "the server still waits: a dripping client holds a thread forever"


# -- bursts ---------------------------------------------------------------------------------

def connected_within(socks: list[socket.socket], seconds: float) -> int:
    """How many non-blocking connects complete their handshake within `seconds`."""
    done = 0
    with selectors.DefaultSelector() as sel:
        for s in socks:
            sel.register(s, selectors.EVENT_WRITE)
        until = time.monotonic() + seconds
        while done < len(socks) and (left := until - time.monotonic()) > 0:
            for key, _ in sel.select(left):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                sel.unregister(sock)
                assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                done += 1
    return done


def test_a_burst_of_64_connections_waits_in_the_listen_queue(
        provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    server = provider._server
    assert server is not None
    # Hold the accept loop, so the whole burst must wait in the kernel's listen queue: with a
    # queue too short, the handshakes past it are dropped (retried only after 1 s) or reset.
    parked, gate = threading.Event(), threading.Event()

    def park() -> None:
        parked.set()
        gate.wait(5.0)

    monkeypatch.setattr(server, "service_actions", park)
    server.wake()  # the loop sleeps until an event: one turn, and it parks
    socks: list[socket.socket] = []
    try:
        assert parked.wait(2.0)
        for _ in range(64):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(sock)
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", provider.port))
        assert connected_within(socks, 0.5) == 64
        for sock in socks:
            sock.settimeout(2.0)
            sock.sendall(head(f"Content-Length: {len(VALID)}") + VALID)
        gate.set()
        statuses = [response_of(read_to_eof(sock))[0] for sock in socks]
    finally:
        gate.set()
        for sock in socks:
            sock.close()
    assert statuses == [200] * 64
    assert len(provider.requests(KEY)) == 64
