"""A wrongly shaped provider reply is a clean, non-retryable provider error, never a traceback."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from crashmatrix.agent.provider import ProviderClient, ProviderConfig, ProviderError


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[http.server.HTTPServer] = []

    def start(body: object) -> str:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}/v1"

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.mark.parametrize(("message", "why"), [
    (None, "the message is NoneType"),
    ("hi", "the message is str"),
    ({"role": "assistant", "tool_calls": "oops"}, "tool_calls is not an array"),
    ({"role": "assistant", "tool_calls": [{"id": "c1"}]}, "tool_calls[0] has no function"),
    ({"role": "assistant", "content": 7}, "content is not a string"),
])
def test_a_wrongly_shaped_reply_is_a_clean_error(serve: Any, message: object, why: str) -> None:
    client = ProviderClient(ProviderConfig(base_url=serve({"choices": [{"message": message}]}), timeout_s=5))
    with pytest.raises(ProviderError, match="malformed response body") as err:
        client.complete([{"role": "user", "content": "x"}], [])
    assert why in str(err.value)
    assert not err.value.retryable


def test_a_well_shaped_reply_passes(serve: Any) -> None:
    good = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
    client = ProviderClient(ProviderConfig(base_url=serve({"choices": [{"message": good}]}), timeout_s=5))
    assert client.complete([{"role": "user", "content": "x"}], []) == good
