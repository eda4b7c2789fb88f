"""The fake provider's HTTP server on 127.0.0.1: `POST /<case_key><wire suffix>` for each wire."""

from __future__ import annotations

import io
import json
import re
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from crashmatrix.fakes import api_errors, sse
from crashmatrix.fakes.case import Case, CaseState, Decision
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.fakes.wire import Wire
from crashmatrix.fakes.wire_anthropic import ANTHROPIC
from crashmatrix.fakes.wire_chat import CHAT
from crashmatrix.fakes.wire_responses import RESPONSES
from crashmatrix.scenarios.model import ProviderFault, Scenario

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# Each wire is served under its own path after the case key (docs/wires.md). A case key
# never holds a "/" once URL-quoted, so the suffix alone tells the wire.
WIRES: tuple[Wire, ...] = (CHAT, RESPONSES, ANTHROPIC)
SUFFIX = CHAT.suffix
MAX_BODY = 64 * 1024 * 1024
# Bounds one read or write on a client that went quiet, so stop() never waits long.
SOCKET_TIMEOUT_S = 5.0
# Bounds the whole reading of a request (request line, headers, body): the socket timeout
# alone restarts on every byte, so a client dripping one byte a second would hold a handler
# thread forever. A loopback client sends a whole request in milliseconds; 10 s leaves room
# for a loaded machine and a 64 MB body. Read at each request, so a test can lower it.
REQUEST_DEADLINE_S = 10.0
# socketserver listens with a backlog of 5. A burst of connections (many agents of a matrix
# run, or an agent's parallel requests) past the backlog has its handshakes dropped on Linux:
# each waits a 1 s SYN retransmit, which looks like a slow provider (or is reset, with
# tcp_abort_on_overflow). 128 covers any burst the harness makes; the kernel caps it at
# net.core.somaxconn anyway.
LISTEN_BACKLOG = 128
_READ_SIZE = 1024 * 1024  # a body is read in pieces: memory follows what arrived, not the claim
_MAX_CHUNK_LINE = 4096  # a chunk-size line or trailer line (hex size plus extensions)
# Deeper JSON is refused as unparsable. Python's decoder and encoder recurse, so a body nested
# just under the recursion limit would parse, then crash the handler when the fake encodes it
# again deeper in the stack; real chat requests nest a few levels (tool schemas a few dozen),
# and serde_json, for one, stops at 128 by default.
MAX_JSON_DEPTH = 256
_DIGITS = re.compile(rb"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]+")


def _too_deep(body: bytes, payload: Any) -> bool:
    """Whether `payload` nests arrays and objects more than MAX_JSON_DEPTH deep."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return False  # too few brackets to nest that deep: skip the walk
    stack: list[tuple[Any, int]] = [(payload, 1)]
    while stack:  # a walk with its own stack: recursing here would hit the same limit
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if depth > MAX_JSON_DEPTH:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


class _Refused(Exception):
    """The request's framing is refused before (or while) its body is read."""

    def __init__(self, error: api_errors.ApiError) -> None:
        super().__init__(error.message)
        self.error = error


class _DeadlineReader(io.RawIOBase):
    """The socket's reads, each cut short at the request's deadline (TimeoutError after it).

    Sits under the handler's buffered `rfile`, so the request line, the headers and the body
    all count against the one deadline, however the buffered layer splits its reads.
    """

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self.deadline = time.monotonic() + REQUEST_DEADLINE_S

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer, /) -> int:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request was not received before its deadline")
        self._sock.settimeout(min(remaining, SOCKET_TIMEOUT_S))
        try:
            return self._sock.recv_into(buffer)
        finally:
            # Writes keep the plain socket timeout, not whatever was left of the deadline.
            self._sock.settimeout(SOCKET_TIMEOUT_S)


class _Server(ThreadingHTTPServer):
    # Handler threads are daemons, so they never hold up interpreter exit. socketserver does
    # not track daemon threads (server_close() joins only the others), so the server keeps its
    # own list and stop() joins them: it leaves no thread behind.
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

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
        """Wait for every request thread; each is bounded by the request deadline (reading), its
        socket timeout (writing) and the provider's `stopping` event (held responses wake on
        it). Any still running stay listed."""
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
    _reader: _DeadlineReader

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log is the record, not stderr

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the buffered reader setup() made; ours reads the same socket
        self._reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        # The deadline runs from here; a timeout while reading the request line or headers
        # closes the connection (the base class does that): there is no request to answer yet.
        self._reader.deadline = time.monotonic() + REQUEST_DEADLINE_S
        super().handle_one_request()

    def do_POST(self) -> None:
        # The body is read whole before the request is routed, as a front end does: every
        # answer, 404s included, then goes to a client that has finished sending, and no
        # refused request reaches a case's log.
        try:
            body = self._read_body()
        except _Refused as refused:
            self._send_error(refused.error)
            return
        except TimeoutError:
            # Answered rather than just closed: the client learns why (OpenAI's SDKs retry a
            # 408), and a client still dripping its body reads it once it stops to listen.
            self._send_error(api_errors.request_timeout())
            return
        if body is None:
            # The client hung up mid-body (a killed agent): no one to answer, and a request
            # never sent whole is not one the agent made, so it is not recorded.
            self.close_connection = True
            return
        path = urlsplit(self.path).path
        wire = next((w for w in WIRES if path.endswith(w.suffix)), None)
        if wire is None or not path.startswith("/") or len(path) <= len(wire.suffix) + 1:
            self._send_error(api_errors.invalid_url("POST", path))
            return
        raw_key = path[1 : -len(wire.suffix)]
        if "/" in raw_key:
            self._send_error(api_errors.invalid_url("POST", path))
            return
        case = self.server.provider.case(unquote(raw_key))
        if case is None:
            self._send_error(wire.errors.unknown_case(unquote(raw_key)))
            return
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            # RecursionError: deeply nested arrays or objects exhaust the decoder's recursion
            # limit; to the client that is one more body that cannot be parsed.
            self._send(case.record_unparsable(wire))
            return
        if isinstance(payload, dict | list) and _too_deep(body, payload):
            self._send(case.record_unparsable(wire))
            return
        self._send(case.handle(payload, wire))

    def _read_body(self) -> bytes | None:
        """The request body, or None when the client hung up before sending all of it.

        Raises _Refused for framing a real service refuses, TimeoutError past the deadline.
        """
        transfer = self.headers.get("Transfer-Encoding")
        if transfer is not None:
            # An HTTP/1.1 server must read a chunked body (RFC 9112 7; a streamed upload has no
            # length up front); it overrides any Content-Length (6.3). When chunked is not the
            # final coding, the body's end is unknowable: 400 (6.1).
            if transfer.split(",")[-1].strip().lower() != "chunked":
                raise _Refused(api_errors.bad_framing(
                    f"unsupported Transfer-Encoding {transfer!r}"))
            return self._read_chunked()
        values = self.headers.get_all("Content-Length")
        if not values:
            # Without a length or chunked framing a POST's body cannot be delimited. RFC 9112
            # would read it as empty, but real API front ends (Mistral's API, Google's, IIS on
            # Azure) answer 411 Length Required, and so does the fake: an empty body would
            # otherwise be blamed on the client's JSON.
            raise _Refused(api_errors.length_required())
        # One value, or a list of identical ones (RFC 9110 8.6); digits only, so no sign, no
        # whitespace inside, no underscores (int() alone would take "-1", " 1_0 ").
        claims = {v.strip().encode() for value in values for v in value.split(",")}
        if len(claims) != 1 or not _DIGITS.fullmatch(claim := claims.pop()):
            raise _Refused(api_errors.bad_framing(
                f"invalid Content-Length header: {', '.join(values)!r}"))
        digits = claim.lstrip(b"0")
        # Compared by digit count first: int() refuses a string of over 4300 digits.
        if len(digits) > len(str(MAX_BODY)) or int(digits or b"0") > MAX_BODY:
            # Decided from the header alone: nothing of the body is read. A client that writes
            # all of it before reading may see a reset instead of this answer; either way the
            # fake never spends 64 MB on it.
            raise _Refused(api_errors.body_too_large(MAX_BODY))
        return self._read_exactly(int(digits or b"0"))

    def _read_exactly(self, length: int) -> bytes | None:
        body = bytearray()
        while len(body) < length:
            piece = self.rfile.read(min(length - len(body), _READ_SIZE))
            if not piece:
                return None
            body += piece
        return bytes(body)

    def _read_line(self) -> bytes | None:
        line = self.rfile.readline(_MAX_CHUNK_LINE + 1)
        if len(line) > _MAX_CHUNK_LINE:
            raise _Refused(api_errors.bad_framing("a chunked body's line is too long"))
        return line if line.endswith(b"\n") else None

    def _read_chunked(self) -> bytes | None:
        body = bytearray()
        while True:
            line = self._read_line()
            if line is None:
                return None
            size = line.split(b";", 1)[0].strip()
            if not _HEX.fullmatch(size):
                raise _Refused(api_errors.bad_framing(f"invalid chunk size {size[:32]!r}"))
            length = int(size, 16)  # bounded: the line is at most _MAX_CHUNK_LINE bytes
            if length == 0:
                break
            if len(body) + length > MAX_BODY:
                raise _Refused(api_errors.body_too_large(MAX_BODY))  # before reading the chunk
            chunk = self._read_exactly(length)
            end = None if chunk is None else self._read_line()
            if chunk is None or end is None:
                return None
            if end.strip():
                raise _Refused(api_errors.bad_framing("a chunk does not end where its size says"))
            body += chunk
        while (trailer := self._read_line()) is not None:  # trailer fields, ignored
            if not trailer.strip():
                return bytes(body)
        return None

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
        if decision.events is not None:
            # A streamed answer, sent whole: it is computed before the first byte, and a
            # Content-Length lets the client tell a complete stream from one cut short.
            data, kind = sse.encode(decision.events), "text/event-stream; charset=utf-8"
        else:
            data, kind = json.dumps(decision.body, ensure_ascii=False).encode(), "application/json"
        self.send_response(decision.status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeProvider:
    """A scripted provider serving many cases at once, on three wires: OpenAI Chat Completions,
    OpenAI Responses and Anthropic Messages (docs/wires.md), one scenario script for all.

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
        server.join_handlers(REQUEST_DEADLINE_S + SOCKET_TIMEOUT_S + 1.0)
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
        """The OpenAI base URL for a case (Chat Completions and Responses); any string is a
        valid key (it is URL-quoted)."""
        return f"{self.root_url(case_key)}/v1"

    def root_url(self, case_key: str) -> str:
        """The case's URL without `/v1`: the base URL Anthropic's clients take (they add
        `/v1/messages` themselves)."""
        return f"http://{self._address[0]}:{self.port}/{quote(case_key, safe='')}"

    def register(self, case_key: str, scenario: Scenario, state: CaseState | None = None) -> str:
        """Serve `scenario` under `case_key`, with a fresh fault schedule and log (or as `state`
        left them: `state(key)` of another case); returns the base URL. A key can only be
        registered once until it is forgotten."""
        if not case_key:
            raise ValueError("case_key must be a non-empty string")
        case = Case(case_key, scenario)
        if state is not None:
            case.restore(state)
        with self._lock:
            if case_key in self._cases:
                raise ValueError(f"case {case_key!r} is already registered")
            self._cases[case_key] = case
        return self.base_url(case_key)

    def state(self, case_key: str) -> CaseState:
        """The case's log, fault schedule and stored responses as they are now."""
        case = self.case(case_key)
        if case is None:
            raise KeyError(case_key)
        return case.state()

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
