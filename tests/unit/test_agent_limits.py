"""The reference agent's bounds: call ids, the step limit, the response size cap, the deadline."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.agent import provider as provider_mod
from crashmatrix.agent import records as R
from crashmatrix.agent.provider import ProviderClient, ProviderConfig, ProviderError
from crashmatrix.agent.state import fold
from crashmatrix.agent.tools import BUILTINS, invoke
from tests.support.agent_env import make_agent, make_paths
from tests.support.stub_provider import StubProvider, answer, call, tool_calls


@pytest.mark.parametrize(("calls", "why"), [
    ([call("c1", "append_note", path="CHANGELOG.md", line="a"),
      call("c1", "append_note", path="CHANGELOG.md", line="b")],
     "tool_calls[1] repeats the id 'c1'"),
    ([{"type": "function", "function": {"name": "append_note",
                                        "arguments": '{"path": "CHANGELOG.md", "line": "a"}'}}],
     "tool_calls[0] has no id"),
    ([{"id": "", "type": "function", "function": {"name": "read", "arguments": "{}"}}],
     "tool_calls[0] has no id"),
    ([{"id": 7, "type": "function", "function": {"name": "read", "arguments": "{}"}}],
     "tool_calls[0] has no id"),
])
def test_calls_without_unique_ids_run_nothing_and_fail_the_run_visibly(
        tmp_path: Path, calls: list[dict[str, Any]], why: str) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(lambda messages: tool_calls(*calls)) as stub, \
            make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "failed"
    finished = [e for e in paths.entries() if e["type"] == "run_finished"]
    assert finished[-1]["outcome"] == "failed"
    assert why in finished[-1]["reason"]
    assert not any(e["type"] == "tool_started" for e in paths.entries())
    assert (paths.workspace / "CHANGELOG.md").read_text() == "# Changelog\n"  # nothing ran


def _runaway(messages: list[dict[str, Any]]) -> dict[str, Any]:
    # Always another call (an unknown tool: even invalid calls are steps).
    return tool_calls(call(f"c{len(messages)}", "no_such_tool"))


def test_a_runaway_provider_is_stopped_at_the_step_limit(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(_runaway) as stub, make_agent(paths, stub.url) as agent:
        agent.config = dataclasses.replace(agent.config, max_steps=5)
        assert agent.run_prompt("t") == "failed"
    assert len(stub.requests) == 5
    entries = paths.entries()
    finished = [e for e in entries if e["type"] == "run_finished"][-1]
    assert finished["reason"] == "step limit 5 reached"
    assert any(e["type"] == "notice" and "step limit" in e["text"] for e in entries)


def test_the_step_limit_counts_across_resumed_runs(tmp_path: Path) -> None:
    # A crash loop must not reset the count: replies of the run a continuation resumed count.
    state = fold([
        R.run_started("run-1", R.Intent.PROMPT),
        R.message("m1", "run-1", R.Role.ASSISTANT, None),
        R.message("m2", "run-1", R.Role.ASSISTANT, None),
        R.run_finished("run-1", R.Outcome.ABORTED, "interrupted"),
        R.run_started("run-2", R.Intent.RESUME, "run-1", 1),
        R.message("m3", "run-2", R.Role.ASSISTANT, None),
        R.run_started("run-3", R.Intent.PROMPT),
        R.message("m4", "run-3", R.Role.ASSISTANT, None),
    ])
    assert state.chain_replies("run-2") == 3
    assert state.chain_replies("run-3") == 1


def _read_request(conn: socket.socket) -> None:
    """The whole request: a socket closed with unread input resets the connection, and the
    reset may discard the reply before the client reads it."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return
        body += chunk


@pytest.fixture
def raw_server() -> Iterator[Any]:
    """A one-connection-at-a-time server whose reply is written by the test's function."""
    socks: list[socket.socket] = []

    def start(respond: Any) -> str:
        srv = socket.create_server(("127.0.0.1", 0))
        socks.append(srv)

        def serve() -> None:
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                with conn:
                    _read_request(conn)
                    with contextlib.suppress(OSError):
                        respond(conn)

        threading.Thread(target=serve, daemon=True).start()
        return f"http://127.0.0.1:{srv.getsockname()[1]}/v1"

    yield start
    for s in socks:
        s.close()


def test_an_oversized_response_without_a_length_is_refused(
        raw_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_mod, "MAX_RESPONSE_BYTES", 1000)

    def huge(conn: socket.socket) -> None:  # no Content-Length: only reading tells the size
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
        chunk = b" " * 1000
        for _ in range(50):
            conn.sendall(chunk)

    client = ProviderClient(ProviderConfig(base_url=raw_server(huge), timeout_s=5))
    with pytest.raises(ProviderError, match="larger than 1000 bytes") as err:
        client.complete([{"role": "user", "content": "x"}], [])
    assert not err.value.retryable


def test_a_declared_oversized_response_is_refused_from_its_header(
        raw_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provider_mod, "MAX_RESPONSE_BYTES", 1000)

    def declared(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 200000000\r\n\r\n{")

    client = ProviderClient(ProviderConfig(base_url=raw_server(declared), timeout_s=5))
    with pytest.raises(ProviderError, match="larger than 1000 bytes"):
        client.complete([{"role": "user", "content": "x"}], [])


def test_the_provider_timeout_bounds_the_whole_request_not_each_read(raw_server: Any) -> None:
    stop = threading.Event()

    def trickle(conn: socket.socket) -> None:  # a byte every 0.2 s: no single read times out
        for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" * 10:
            if stop.wait(0.2):
                return
            conn.sendall(bytes([byte]))

    client = ProviderClient(ProviderConfig(base_url=raw_server(trickle), timeout_s=1.0))
    started = time.monotonic()
    try:
        with pytest.raises(ProviderError, match="timeout") as err:
            client.complete([{"role": "user", "content": "x"}], [])
    finally:
        stop.set()
    assert err.value.retryable
    assert time.monotonic() - started < 4.0  # the 1 s deadline, not 500 reads of 0.2 s


def test_a_reply_in_time_is_still_accepted(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(lambda messages: answer("done")) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "completed"


def test_arguments_holding_a_lone_surrogate_are_refused_before_any_commit(tmp_path: Path) -> None:
    # JSON can escape a lone surrogate; no UTF-8 commit, path or command can hold one.
    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if not any(m["role"] == "tool" for m in messages):
            return tool_calls({"id": "c1", "type": "function",
                               "function": {"name": "read", "arguments": '{"path": "\\ud800"}'}})
        return answer("done")

    paths = make_paths(tmp_path)
    with StubProvider(script) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "completed"
    result = next(e for e in paths.entries() if e.get("tool_call_id") == "c1")
    assert result["is_error"]
    assert "not valid JSON" in result["content"]
    assert not any(e["type"] == "tool_started" for e in paths.entries())


def test_a_reply_holding_a_lone_surrogate_is_a_clean_provider_error(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(lambda messages: answer("\ud800")) as stub, \
            make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "failed"
    finished = [e for e in paths.entries() if e["type"] == "run_finished"][-1]
    assert "lone surrogate" in finished["reason"]


@pytest.mark.parametrize(("name", "args"), [
    ("read", {"path": "\ud800"}),
    ("write", {"path": "a", "content": "x\ud800"}),
    ("append_note", {"path": "a", "line": "\ud800"}),
    ("bash", {"command": "echo \ud800"}),
])
def test_a_value_the_os_cannot_take_is_an_error_result(
        tmp_path: Path, name: str, args: dict[str, Any]) -> None:
    result = invoke(BUILTINS[name], tmp_path, args)
    assert result.is_error
    assert "surrogate" in result.content


def test_a_body_cut_short_is_a_retryable_connection_error(raw_server: Any) -> None:
    def short(conn: socket.socket) -> None:  # 20 of the 72 bytes it declares, then hangs up
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 72\r\n\r\n" + b'{"choices": [' + b" " * 7)

    client = ProviderClient(ProviderConfig(base_url=raw_server(short), timeout_s=5))
    with pytest.raises(ProviderError, match=r"^connection: ") as err:
        client.complete([{"role": "user", "content": "x"}], [])
    assert err.value.retryable  # the same request may well get the whole answer next time


def test_a_content_length_of_non_ascii_digits_is_no_crash(raw_server: Any) -> None:
    def odd(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n{}")

    client = ProviderClient(ProviderConfig(base_url=raw_server(odd), timeout_s=5))
    with pytest.raises(ProviderError):
        client.complete([{"role": "user", "content": "x"}], [])


@pytest.mark.parametrize("depth", [990, 100_000])
def test_deeply_nested_json_is_a_malformed_reply_not_a_crash(raw_server: Any, depth: int) -> None:
    body = b'{"choices": [{"message": {"role": "assistant", "content": null, "x": ' \
        + b"[" * depth + b"]" * depth + b"}}]}"

    def deep(conn: socket.socket) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)

    client = ProviderClient(ProviderConfig(base_url=raw_server(deep), timeout_s=5))
    with pytest.raises(ProviderError, match="malformed response body") as err:
        client.complete([{"role": "user", "content": "x"}], [])
    assert not err.value.retryable
