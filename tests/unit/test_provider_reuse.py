"""The agent's provider client keeps its connection: reused while it lasts, never a hidden resend."""

from __future__ import annotations

import gc
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.agent.provider import ProviderClient, ProviderConfig, ProviderError
from crashmatrix.fakes import FakeProvider, http1
from crashmatrix.scenarios import Scenario, load_file
from tests.support.stub_provider import StubProvider, answer

SYSTEM = {"role": "system", "content": "s"}
TASK = {"role": "user", "content": "t"}
SCRIPT = """
task = "t"
{faults}
[[script]]
name = "done"
reply.final = "done"
"""


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


def scenario(tmp_path: Path, fault: str = "", *extra: str) -> Scenario:
    """A one-rule script, with a fault of kind `fault` on the first request if one is named."""
    faults = "\n".join([f'[[faults]]\nkind = "{fault}"\nwhen = {{ turns = 0 }}', *extra])
    path = tmp_path / "s.toml"
    path.write_text(SCRIPT.format(faults=faults if fault else ""), encoding="utf-8")
    return load_file(path)


def local_port(client: ProviderClient) -> int | None:
    """The local port of the client's idle connection, None when it keeps none."""
    idle = client._idle
    if not idle or idle[0].sock is None:
        return None
    port: int = idle[0].sock.getsockname()[1]
    return port


def ask(client: ProviderClient) -> dict[str, Any]:
    return client.complete([SYSTEM, TASK], [])


def test_one_connection_carries_every_request(tmp_path: Path, provider: FakeProvider) -> None:
    client = ProviderClient(ProviderConfig(provider.register("c", scenario(tmp_path)),
                                           timeout_s=5))
    assert ask(client)["content"] == "done"
    port = local_port(client)
    assert port is not None
    for _ in range(3):
        ask(client)
        assert local_port(client) == port
    assert len(provider.requests("c")) == 4
    client.close()
    assert local_port(client) is None


def test_a_connection_closed_while_idle_is_replaced_without_an_error(
        tmp_path: Path, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http1, "KEEPALIVE_IDLE_S", 0.2)
    client = ProviderClient(ProviderConfig(provider.register("c", scenario(tmp_path)),
                                           timeout_s=5))
    ask(client)
    first = local_port(client)
    time.sleep(0.6)  # the server closes the idle connection meanwhile
    assert ask(client)["content"] == "done"
    assert local_port(client) not in (None, first)
    # Replaced before anything was sent on it: each call is exactly one request.
    assert [r.status for r in provider.requests("c")] == [200, 200]
    client.close()


def test_a_dropped_connection_is_one_retryable_error_then_a_new_connection(
        tmp_path: Path, provider: FakeProvider) -> None:
    client = ProviderClient(ProviderConfig(
        provider.register("c", scenario(tmp_path, "drop")), timeout_s=5))
    with pytest.raises(ProviderError, match=r"^connection: RemoteDisconnected$") as err:
        ask(client)
    assert err.value.retryable
    assert local_port(client) is None
    assert ask(client)["content"] == "done"
    assert [r.fault for r in provider.requests("c")] == ["drop", None]  # not resent on its own
    client.close()


def test_a_kept_connection_is_dropped_after_a_timeout(tmp_path: Path,
                                                     provider: FakeProvider) -> None:
    url = provider.register("c", scenario(tmp_path, "timeout", "hold_s = 5"))
    client = ProviderClient(ProviderConfig(url, timeout_s=0.3))
    with pytest.raises(ProviderError, match="timeout") as err:
        ask(client)
    assert err.value.retryable
    assert local_port(client) is None
    assert ask(client)["content"] == "done"
    assert [r.fault for r in provider.requests("c")] == ["timeout", None]
    client.close()


def test_the_watchdog_never_shuts_a_kept_connection(tmp_path: Path,
                                                    provider: FakeProvider) -> None:
    # Calls that each end well within the timeout, over more than the timeout in all: a watchdog
    # of an earlier call that still fired would break a later one.
    client = ProviderClient(ProviderConfig(provider.register("c", scenario(tmp_path)),
                                           timeout_s=0.25))
    port = None
    for _ in range(6):
        assert ask(client)["content"] == "done"
        port = port or local_port(client)
        assert local_port(client) == port
        time.sleep(0.1)
    client.close()


def test_a_server_that_closes_gets_a_new_connection_each_time() -> None:
    # The stub is HTTP/1.0: it closes after every answer, and the client keeps nothing.
    with StubProvider(lambda messages: answer("ok")) as stub:
        client = ProviderClient(ProviderConfig(stub.url, timeout_s=5))
        for _ in range(2):
            assert ask(client)["content"] == "ok"
            assert local_port(client) is None


def test_stray_bytes_on_an_idle_connection_are_not_read_as_the_next_answer() -> None:
    served = 0
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    body = b'{"choices": [{"message": {"role": "assistant", "content": "ok"}}]}'
    answer_bytes = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    client = ProviderClient(ProviderConfig(
        f"http://127.0.0.1:{listener.getsockname()[1]}/v1", timeout_s=5))
    def serve() -> None:
        nonlocal served
        first, _ = listener.accept()
        with first:  # kept open: only the junk after its answer tells it is unusable
            first.recv(65536)
            first.sendall(answer_bytes)
            time.sleep(0.05)  # after the answer was read: bytes no answer announced
            first.sendall(b"HTTP/1.1 200 OK\r\n")
            second, _ = listener.accept()
            with second:
                second.recv(65536)
                second.sendall(answer_bytes)
                served = 2

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        assert ask(client)["content"] == "ok"
        time.sleep(0.2)
        assert ask(client)["content"] == "ok"  # on a new connection, not after the junk
    finally:
        thread.join(5)
        listener.close()
        client.close()
    assert served == 2


def test_a_collected_client_leaves_no_unclosed_socket(tmp_path: Path,
                                                      provider: FakeProvider) -> None:
    client = ProviderClient(ProviderConfig(provider.register("c", scenario(tmp_path)),
                                           timeout_s=5))
    ask(client)
    assert local_port(client) is not None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del client
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
