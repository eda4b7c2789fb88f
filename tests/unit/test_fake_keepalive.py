"""The fake provider's connections: kept alive, pipelined, closed when they must be, never blocking."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.fakes import FakeProvider, http1
from crashmatrix.scenarios import Scenario, load_builtin, load_file

VALID = json.dumps({"model": "m", "messages": [{"role": "system", "content": "s"},
                                               {"role": "user", "content": "t"}]}).encode()
HELD = """
task = "t"
[[faults]]
kind = "timeout"
hold_s = {hold}
when = {{ turns = 0 }}
[[script]]
name = "done"
reply.final = "done"
"""


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        p.register("c", load_builtin()["finished"])
        yield p


def held(tmp_path: Path, hold: float) -> Scenario:
    path = tmp_path / "held.toml"
    path.write_text(HELD.format(hold=hold), encoding="utf-8")
    return load_file(path)


def post_bytes(key: str = "c", *headers: str, body: bytes = VALID, version: str = "1.1") -> bytes:
    lines = [f"POST /{key}/v1/chat/completions HTTP/{version}", "Host: 127.0.0.1",
             f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def connect(provider: FakeProvider) -> socket.socket:
    return socket.create_connection(("127.0.0.1", provider.port), timeout=3.0)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response, read by its Content-Length (the connection may stay open after it); reads
    no byte past it, so pipelined answers are read one by one."""
    head = bytearray()
    while not head.endswith(b"\r\n\r\n"):
        piece = sock.recv(1)
        assert piece, f"closed before a whole head: {bytes(head)!r}"
        head += piece
    status_line, *lines = head.decode("latin-1").strip().split("\r\n")
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    body = bytearray()
    while len(body) < int(fields["content-length"]):
        piece = sock.recv(int(fields["content-length"]) - len(body))
        assert piece, "closed before the whole body"
        body += piece
    return int(status_line.split()[1]), fields, bytes(body)


def closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_requests_pipelined_on_one_connection_are_answered_in_order(
        provider: FakeProvider) -> None:
    with connect(provider) as sock:
        sock.sendall(post_bytes() + post_bytes(key="nobody") + post_bytes())
        statuses = [read_response(sock)[0] for _ in range(3)]
        assert not closed_within(sock, 0.2), "an HTTP/1.1 connection is kept alive"
    assert statuses == [200, 404, 200]
    assert len(provider.requests("c")) == 2


def test_an_http10_client_is_closed_unless_it_asks_for_keep_alive(provider: FakeProvider) -> None:
    with connect(provider) as sock:
        sock.sendall(post_bytes(version="1.0"))
        status, fields, _ = read_response(sock)
        assert (status, fields.get("connection")) == (200, "close")
        assert closed_within(sock, 2.0)
    with connect(provider) as sock:
        sock.sendall(post_bytes("c", "Connection: keep-alive", version="1.0"))
        status, fields, _ = read_response(sock)
        assert (status, fields.get("connection")) == (200, "keep-alive")
        assert not closed_within(sock, 0.2)


def test_connection_close_is_honoured(provider: FakeProvider) -> None:
    with connect(provider) as sock:
        sock.sendall(post_bytes("c", "Connection: close"))
        assert read_response(sock)[1]["connection"] == "close"
        assert closed_within(sock, 2.0)


def test_a_refused_request_ends_a_kept_alive_connection(provider: FakeProvider) -> None:
    # Without a length the rest of the request cannot be told from the next one.
    with connect(provider) as sock:
        sock.sendall(post_bytes() + b"POST /c/v1/chat/completions HTTP/1.1\r\n\r\n" + VALID)
        assert read_response(sock)[0] == 200
        status, fields, _ = read_response(sock)
        assert (status, fields["connection"]) == (411, "close")
        assert closed_within(sock, 2.0)
    assert len(provider.requests("c")) == 1


def test_expect_100_continue_is_answered_before_the_body(provider: FakeProvider) -> None:
    with connect(provider) as sock:
        head = post_bytes("c", "Expect: 100-continue")[: -len(VALID)]
        sock.sendall(head)
        assert sock.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(VALID)
        assert read_response(sock)[0] == 200


def test_an_idle_kept_alive_connection_is_closed_after_the_idle_timeout(
        provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "KEEPALIVE_IDLE_S", 0.3)
    with connect(provider) as sock:
        sock.sendall(post_bytes())
        assert read_response(sock)[0] == 200
        started = time.monotonic()
        assert closed_within(sock, 3.0)
        assert time.monotonic() - started < 2.0


def test_a_held_response_does_not_delay_another_cases_requests(
        tmp_path: Path, provider: FakeProvider) -> None:
    provider.register("slow", held(tmp_path, 5.0))
    with connect(provider) as stuck, connect(provider) as dripping:
        stuck.sendall(post_bytes("slow"))  # held for 5 s by its timeout fault
        dripping.sendall(post_bytes("c")[:-3])  # a body that has not all arrived
        time.sleep(0.1)
        started = time.monotonic()
        for _ in range(5):
            conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=3.0)
            conn.request("POST", "/c/v1/chat/completions", body=VALID)
            assert conn.getresponse().status == 200
            conn.close()
        assert time.monotonic() - started < 1.0
        dripping.sendall(post_bytes("c")[-3:])
        assert read_response(dripping)[0] == 200
    assert [r.fault for r in provider.requests("slow")] == ["timeout"]


def test_a_held_response_ends_when_its_client_gives_up(tmp_path: Path,
                                                        provider: FakeProvider) -> None:
    provider.register("slow", held(tmp_path, 30.0))
    conn = http.client.HTTPConnection("127.0.0.1", provider.port, timeout=0.2)
    conn.request("POST", "/slow/v1/chat/completions", body=VALID)
    with pytest.raises(TimeoutError):
        conn.getresponse()
    conn.close()
    server = provider._server
    assert server is not None
    deadline = time.monotonic() + 2.0
    while server._conns and time.monotonic() < deadline:  # the held connection is let go
        time.sleep(0.02)
    assert not server._conns


def test_stop_closes_every_connection_and_leaves_no_thread(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    p = FakeProvider().start()
    p.register("c", load_builtin()["finished"])
    p.register("slow", held(tmp_path, 30.0))
    port = p.port
    idle, holding, partial = connect(p), connect(p), connect(p)
    try:
        idle.sendall(post_bytes())
        assert read_response(idle)[0] == 200
        holding.sendall(post_bytes("slow"))
        partial.sendall(post_bytes()[:20])
        time.sleep(0.1)
        started = time.monotonic()
        p.stop()
        assert time.monotonic() - started < 2.0
        for sock in (idle, holding, partial):
            assert closed_within(sock, 2.0)
    finally:
        for sock in (idle, holding, partial):
            sock.close()
    assert [t for t in set(threading.enumerate()) - before
            if t.name.startswith("fake-provider")] == []
    with pytest.raises(ConnectionRefusedError):  # the listening socket is closed too
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()


def test_a_head_that_is_too_large_is_refused(provider: FakeProvider) -> None:
    with connect(provider) as sock:
        sock.sendall(b"POST /" + b"x" * 70_000 + b" HTTP/1.1\r\n")
        status, fields, _ = read_response(sock)
        assert (status, fields["connection"]) == (414, "close")


@pytest.mark.parametrize(("request_line", "status"), [
    (b"POST /c/v1/chat/completions HTTP/2.0", 505),
    (b"POST /c/v1/chat/completions", 400),
    (b"POST /c/v1/chat/completions HTTX/1.1", 400),
])
def test_a_malformed_request_line_is_refused(provider: FakeProvider, request_line: bytes,
                                             status: int) -> None:
    with connect(provider) as sock:
        sock.sendall(request_line + b"\r\nContent-Length: 2\r\n\r\n{}")
        assert read_response(sock)[0] == status


def test_other_methods_get_the_apis_invalid_url(provider: FakeProvider) -> None:
    with connect(provider) as sock:
        sock.sendall(b"HEAD /c/v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /c/v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        data = bytearray()
        while data.count(b"\r\n\r\n") < 2 or not data.endswith(b"}"):
            piece = sock.recv(65536)
            assert piece
            data += piece
    # The HEAD's answer has no body: the GET's answer follows its head directly.
    head_answer, get_head, get_body = bytes(data).split(b"\r\n\r\n")
    assert head_answer.startswith(b"HTTP/1.1 404 ")
    assert get_head.startswith(b"HTTP/1.1 404 ")
    assert json.loads(get_body)["error"]["message"] == "Invalid URL (GET /c/v1/models)"
