"""The fake provider's HTTP server: `POST /<case_key>/v1/chat/completions` on 127.0.0.1."""

from __future__ import annotations

import json
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from crashmatrix.fakes import api_errors
from crashmatrix.fakes.case import Case, Decision
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.scenarios.model import ProviderFault, Scenario

SUFFIX = "/v1/chat/completions"
MAX_BODY = 64 * 1024 * 1024
# Bounds a read from a client that connected and went quiet, so stop() never waits long.
SOCKET_TIMEOUT_S = 5.0


class _Server(ThreadingHTTPServer):
    # Handler threads are daemons, so they never hold up interpreter exit. socketserver does
    # not track daemon threads (server_close() joins only the others), so the server keeps its
    # own list and stop() joins them: it leaves no thread behind.
    daemon_threads = True

    def __init__(self, address: tuple[str, int], provider: FakeProvider) -> None:
        self.provider = provider
        self._handlers: list[threading.Thread] = []
        self._handlers_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread,
                                  args=(request, client_address), daemon=True,
                                  name=f"fake-provider-request-{client_address[1]}")
        thread.start()  # if this raises, serve_forever drops the request; nothing to track
        with self._handlers_lock:
            self._handlers = [t for t in self._handlers if t.is_alive()]
            self._handlers.append(thread)

    def join_handlers(self, timeout_s: float) -> None:
        """Wait for every request thread; each is bounded by its socket timeout and by the
        provider's `stopping` event (held responses wake on it). Any still running stay listed."""
        deadline = time.monotonic() + timeout_s
        with self._handlers_lock:
            handlers = list(self._handlers)
        for thread in handlers:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._handlers_lock:
            self._handlers = [t for t in self._handlers if t.is_alive()]

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup (getfqdn) we neither need nor want.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (its own timeout, a killed agent) is routine, not an error.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = SOCKET_TIMEOUT_S
    server_version = "crashmatrix-fake/1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is the record, not stderr

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if not path.startswith("/") or not path.endswith(SUFFIX) or len(path) <= len(SUFFIX) + 1:
            self._send_error(api_errors.invalid_url("POST", path))
            return
        raw_key = path[1 : -len(SUFFIX)]
        if "/" in raw_key:
            self._send_error(api_errors.invalid_url("POST", path))
            return
        case = self.server.provider.case(unquote(raw_key))
        if case is None:
            self._send_error(api_errors.unknown_case(unquote(raw_key)))
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, MAX_BODY))
        try:
            payload = json.loads(body)
        except ValueError:
            self._send(case.record_unparsable())
            return
        self._send(case.handle(payload))

    def do_GET(self) -> None:
        self._send_error(api_errors.invalid_url("GET", urlsplit(self.path).path))

    def _send_error(self, err: api_errors.ApiError) -> None:
        self._send(Decision(err.status, err.body))

    def _send(self, decision: Decision) -> None:
        fault = decision.fault
        if fault is not None and fault.kind is ProviderFault.TIMEOUT:
            # Hold past the client's timeout, but bounded and cut short by stop().
            self.server.provider.stopping.wait(fault.hold_s)
        if decision.status is None:
            # No response: the connection closes after the request was read.
            self.close_connection = True
            return
        data = json.dumps(decision.body, ensure_ascii=False).encode()
        self.send_response(decision.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeProvider:
    """A scripted OpenAI-compatible provider serving many cases at once.

    Use as a context manager, or call start() and stop(). Each case gets its own base URL
    (`http://127.0.0.1:PORT/<case_key>/v1`), its own fault schedule and its own request log.
    """

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self._address = (host, port)
        self._cases: dict[str, Case] = {}
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeProvider:
        if self._server is not None:
            raise RuntimeError("FakeProvider already started")
        self.stopping.clear()
        self._server = _Server(self._address, self)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fake-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake held (timeout) responses, close every socket, join every thread."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self.stopping.set()
        server.shutdown()  # no request is accepted after this returns
        server.server_close()
        server.join_handlers(SOCKET_TIMEOUT_S + 1.0)
        if thread is not None:
            thread.join()
        self._server = self._thread = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- cases -------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeProvider is not started")
        return self._server.server_port

    def base_url(self, case_key: str) -> str:
        """The OpenAI base URL for a case; any string is a valid key (it is URL-quoted)."""
        return f"http://{self._address[0]}:{self.port}/{quote(case_key, safe='')}/v1"

    def register(self, case_key: str, scenario: Scenario) -> str:
        """Serve `scenario` under `case_key`, with a fresh fault schedule and log; returns the
        base URL. A key can only be registered once until it is forgotten."""
        if not case_key:
            raise ValueError("case_key must be a non-empty string")
        with self._lock:
            if case_key in self._cases:
                raise ValueError(f"case {case_key!r} is already registered")
            self._cases[case_key] = Case(case_key, scenario)
        return self.base_url(case_key)

    def case(self, case_key: str) -> Case | None:
        with self._lock:
            return self._cases.get(case_key)

    def requests(self, case_key: str) -> list[RequestRecord]:
        """The case's requests so far, in arrival order."""
        case = self.case(case_key)
        if case is None:
            raise KeyError(case_key)
        return case.records()

    def forget(self, case_key: str) -> None:
        """Drop a case and its log; later requests for it get a 404."""
        with self._lock:
            self._cases.pop(case_key, None)
