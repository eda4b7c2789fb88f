"""The fake provider's HTTP/1.1 transport: one selector loop, on one thread, serves every connection."""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import http
import json
import math
import re
import selectors
import socket
import struct
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import NamedTuple

from crashmatrix.fakes import api_errors
from crashmatrix.fakes.offload import Worker

# Why one loop and no thread per request: a request costs the fake ~50 us of its own work, and a
# thread per connection cost ten times that (start, switch, join), which the harness paid in its
# own process for every request of every case. Nothing here blocks: a slow client, a held
# (timeout fault) response and an idle kept-alive connection are each just a deadline in the loop,
# so none of them delays another case's requests.
#
# What one client may cost the others is bounded too. A body over MAX_BODY is refused (413) from
# its Content-Length (or chunk size) alone, before any of it is read: the limit once was 64 MB,
# and one 34 MB body of tiny JSON arrays held the loop for 38 s at 1.7 GB while every other case
# waited. 8 MiB is far above an agent's request (a long history with its tool schemas is a few
# hundred KB); a server or a test that needs more says so (Server(max_body=...),
# FakeProvider(max_body=...)). And a body big enough that handling it takes a while (parsing it)
# can be handled on a worker thread beside the loop (Server(offload_over=...)).
MAX_BODY = 8 * 1024 * 1024
# All the bodies being received at once, counted by their announced sizes: a body that would
# take the total past this is refused (503) from its header, so clients that send big bodies and
# stall can hold no more memory than this together. Bodies of _SMALL_BODY or less are always let
# in (an agent's ordinary request is never refused because others hog the budget); those are
# bounded by the number of connections.
MAX_HELD = 8 * MAX_BODY
_SMALL_BODY = 64 * 1024
# A read or write that makes no progress this long ends the connection (a client gone quiet); a
# request cut off in its body is answered 408 and what it sent is dropped. Read at each use
# unless the server was given its own (Server(socket_timeout_s=...)), so a test can lower it.
SOCKET_TIMEOUT_S = 5.0
# Bounds the whole reading of a request (request line, headers, body): the socket timeout alone
# restarts on every byte, so a client dripping one byte a second would hold its connection
# forever. A loopback client sends a whole request in milliseconds; 10 s leaves room for a loaded
# machine and a body of MAX_BODY. Read at each request, as SOCKET_TIMEOUT_S is.
REQUEST_DEADLINE_S = 10.0
# A kept-alive connection may wait this long for its next request. Long on purpose: a client that
# sends on an idle connection just as the server closes it sees a failure it cannot tell from a
# real one, and an agent reports that as a provider error (a retry in its log). No case runs this
# long, so in the harness only the client closes (its process ends) or stop() does.
KEEPALIVE_IDLE_S = 300.0
# After a response that closes the connection, what the client still sends is read and dropped
# for up to this long before the close: closing with unread bytes makes the kernel send a reset,
# which can destroy the answer before the client reads it.
LINGER_S = 1.0
# A burst of connections (many agents of a matrix run, or an agent's parallel requests) past the
# listen backlog has its handshakes dropped on Linux: each waits a 1 s SYN retransmit, which looks
# like a slow provider. 128 covers any burst the harness makes; the kernel caps it at somaxconn.
LISTEN_BACKLOG = 128
_READ_SIZE = 64 * 1024  # per recv: a bigger buffer is allocated (and freed) whole on every call
_MAX_LINE = 65536  # a request line or header line, as http.server allows
_MAX_HEADERS = 100
_MAX_HEAD = 256 * 1024  # the request line and all headers together
_MAX_CHUNK_LINE = 4096  # a chunk-size line or trailer line (hex size plus extensions)
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_VERSION = re.compile(r"HTTP/([0-9])\.([0-9])")
_DIGITS = re.compile(rb"[0-9]+")
_HEX = re.compile(rb"[0-9A-Fa-f]+")
_SERVER = f"crashmatrix-fake/1 Python/{sys.version.split()[0]}"
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


class Request(NamedTuple):
    method: str
    target: str
    body: bytes
    # The header fields, names lower-cased; a repeated field keeps its last value. Last and
    # defaulted, so a handler that reads only the first three (the fake provider) is unchanged.
    headers: Mapping[str, str] = _NO_HEADERS


@dataclass(frozen=True)
class Reply:
    """A response; `status` None sends nothing and closes the connection (after `hold_s`)."""

    status: int | None
    data: bytes = b""
    content_type: str = "application/json"
    hold_s: float = 0.0  # how long to wait before sending it (or closing), cut short by stop()
    reset: bool = False  # status None: close with a reset (RST), not an orderly FIN


Handler = Callable[[Request], Reply]


class _Refused(Exception):
    """The request's framing is refused; the answer closes the connection."""

    def __init__(self, error: api_errors.ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def _refusal(status: int, detail: str) -> _Refused:
    # A status api_errors has no function for, in the same shape as its framing refusals.
    return _Refused(dataclasses.replace(api_errors.bad_framing(detail), status=status))


class _Phase(Enum):
    HEAD = 1  # waiting for, or reading, a request line and headers
    BODY = 2  # reading the body the head announced
    HOLD = 3  # a held reply: nothing is sent until `until`
    LINGER = 4  # the last answer is out: reading and dropping input until EOF or `until`
    # The worker runs the handler on a big body; the socket is out of the selector meanwhile (what
    # the client sends next waits in the kernel), and no deadline runs: the handler is bounded.
    WORK = 5


class _Chunked:
    """Decodes a chunked body as its bytes arrive (RFC 9112 7.1)."""

    def __init__(self, max_body: int, reserve: Callable[[int], None]) -> None:
        self.max_body = max_body
        self.reserve = reserve  # takes each chunk's size from the server's budget, or raises
        self.body = bytearray()
        self.left = -1  # bytes of the current chunk still to come; -1: a size line is next
        self.trailers = False

    def feed(self, buf: bytearray) -> bytes | None:
        """Consume what `buf` holds; the body once complete, else None (more is needed)."""
        pos = 0
        try:
            while True:
                if self.left > 0:
                    if len(buf) - pos < self.left:
                        return None
                    self.body += buf[pos : pos + self.left]
                    pos += self.left
                    self.left = 0
                line = _line(buf, pos)
                if line is None:
                    return None
                pos += len(line)
                if self.trailers:  # trailer fields, ignored, until the empty line
                    if not line.strip():
                        return bytes(self.body)
                elif self.left == 0:
                    if line.strip():
                        raise _Refused(api_errors.bad_framing(
                            "a chunk does not end where its size says"))
                    self.left = -1
                else:
                    size = line.split(b";", 1)[0].strip()
                    if not _HEX.fullmatch(size):
                        raise _Refused(api_errors.bad_framing(
                            f"invalid chunk size {size[:32]!r}"))
                    length = int(size, 16)  # bounded: the line is at most _MAX_CHUNK_LINE bytes
                    if length == 0:
                        self.trailers = True
                    elif len(self.body) + length > self.max_body:
                        # Before the chunk is read.
                        raise _Refused(api_errors.body_too_large(self.max_body))
                    else:
                        self.reserve(length)  # before the chunk is read, too
                        self.left = length
        finally:
            del buf[:pos]


def _line(buf: bytearray, pos: int) -> bytes | None:
    end = buf.find(b"\n", pos, pos + _MAX_CHUNK_LINE)
    if end >= 0:
        return bytes(buf[pos : end + 1])
    if len(buf) - pos >= _MAX_CHUNK_LINE:
        raise _Refused(api_errors.bad_framing("a chunked body's line is too long"))
    return None


class _Conn:
    """One client connection and where its current request stands."""

    def __init__(self, sock: socket.socket, now: float, deadline_s: float,
                 socket_timeout_s: float) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.out = bytearray()
        self.phase = _Phase.HEAD
        # The first request's deadline runs from the accept, as a connection that never sends is
        # not an idle kept-alive one; later requests' run from their first byte.
        self.deadline: float | None = now + deadline_s
        self.socket_timeout_s = socket_timeout_s
        self.last_io = now  # the last progress of a read (while reading) or a write (writing)
        self.until = 0.0  # the end of a hold or linger
        self.eof = False
        self.closed = False
        self.close_after = False  # the answer being written is the connection's last
        self.mask = selectors.EVENT_READ
        self.scan = 0  # where to resume looking for the end of the head
        # The request being read.
        self.method = ""
        self.target = ""
        self.headers: dict[str, str] = {}
        self.keep_alive = True
        self.announce = False  # an HTTP/1.0 client asked for keep-alive: say it is granted
        self.length = 0
        self.chunked: _Chunked | None = None
        self.held: Reply | None = None
        self.reserved = 0  # bytes of the server's body budget this request holds

    def expiry(self) -> float:
        if self.phase is _Phase.WORK:
            return math.inf
        if self.out:
            return self.last_io + self.socket_timeout_s
        if self.phase is _Phase.HOLD or self.phase is _Phase.LINGER:
            return self.until
        if self.deadline is None:
            return self.last_io + KEEPALIVE_IDLE_S
        return min(self.deadline, self.last_io + self.socket_timeout_s)


class Server:
    """Serves `handler` on `address` from serve_forever(), until stop(); keeps connections alive.

    The handler runs on the loop's thread, so it must not block: a reply to hold is returned with
    `hold_s` and the loop holds it. With `offload_over`, a request whose body is bigger runs the
    handler on a worker thread instead (one at a time, in arrival order), so parsing it delays no
    one else; that handler must then be thread-safe. A timeout left None is the module's constant
    (SOCKET_TIMEOUT_S, REQUEST_DEADLINE_S) as it is at each use.
    """

    def __init__(self, address: tuple[str, int], handler: Handler, max_body: int = MAX_BODY, *,
                 max_held: int = MAX_HELD, socket_timeout_s: float | None = None,
                 request_deadline_s: float | None = None, offload_over: int | None = None) -> None:
        self._handler = handler
        self._max_body = max_body  # a bigger body is refused (413) before it reaches the handler
        self._max_held = max_held
        self._held = 0  # the bytes reserved by the bodies being received or handled
        self._socket_timeout_s = socket_timeout_s
        self._request_deadline_s = request_deadline_s
        self._offload_over = offload_over
        self._worker: Worker[_Conn, Request, Reply] = Worker(handler, self.wake, "http1-worker")
        self._conns: dict[int, _Conn] = {}
        self._stopping = False
        self._date = (0, "")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        self._listener = sock
        self.server_address: tuple[str, int] = sock.getsockname()  # as bound: host, port
        self.server_port: int = self.server_address[1]
        # stop() writes a byte here to wake the loop from select().
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(sock, selectors.EVENT_READ, "listener")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")

    def service_actions(self) -> None:
        """Called once per turn of the loop (as socketserver does); a seam for tests."""

    @property
    def held_bytes(self) -> int:
        """The bytes of request bodies held now, received or still to come (by their announced
        sizes), over every connection: 0 once no request is being received or handled. Written on
        the loop's thread only; any thread may read it."""
        return self._held

    def stop(self) -> None:
        """Ask the loop to end; it closes every connection and socket on its way out."""
        self._stopping = True
        self.wake()

    def wake(self) -> None:
        """Make the loop take a turn now (it sleeps in select() until an event or a deadline)."""
        with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
            self._wake_w.send(b"x")

    def serve_forever(self) -> None:
        try:
            while not self._stopping:
                self.service_actions()
                now = time.monotonic()
                timeout = None
                soonest = min((c.expiry() for c in self._conns.values()), default=math.inf)
                if soonest < math.inf:  # only connections at work: sleep until the worker wakes us
                    timeout = max(0.0, soonest - now)
                events = self._selector.select(timeout)
                now = time.monotonic()
                for key, mask in events:
                    if key.data == "listener":
                        self._accept(now)
                    elif key.data == "wake":
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(64)
                    elif isinstance(key.data, _Conn):
                        self._event(key.data, mask, now)
                for conn, reply in self._worker.done():
                    self._worked(conn, reply, now)
                for conn in [c for c in self._conns.values() if c.expiry() <= now]:
                    self._guarded(conn, self._expire, now)
        finally:
            for conn in list(self._conns.values()):
                self._close(conn)
            self._worker.stop()
            self._selector.close()
            for sock in (self._listener, self._wake_r, self._wake_w):
                sock.close()

    def _deadline_s(self) -> float:
        return REQUEST_DEADLINE_S if self._request_deadline_s is None else self._request_deadline_s

    # -- events ------------------------------------------------------------------------------
    def _accept(self, now: float) -> None:
        while True:
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError:
                return  # out of descriptors, say: the rest wait in the backlog
            sock.setblocking(False)
            # Each answer goes out in one write; no reason to wait for the client's ACK first.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Conn(sock, now, self._deadline_s(),
                         SOCKET_TIMEOUT_S if self._socket_timeout_s is None else self._socket_timeout_s)
            self._conns[sock.fileno()] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _event(self, conn: _Conn, mask: int, now: float) -> None:
        if mask & selectors.EVENT_WRITE and not conn.closed:
            self._guarded(conn, self._flush, now)
        if mask & selectors.EVENT_READ and not conn.closed:
            self._guarded(conn, self._read, now)
        if not conn.closed:
            self._guarded(conn, self._advance, now)

    def _guarded(self, conn: _Conn, step: Callable[[_Conn, float], None], now: float) -> None:
        # One connection's failure (a bug, a handler that raised, a reset) ends that connection,
        # never the loop: the other cases' requests go on.
        try:
            step(conn, now)
        except Exception:
            self._close(conn)

    def _read(self, conn: _Conn, now: float) -> None:
        try:
            data = conn.sock.recv(_READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            conn.eof = True
            return
        conn.last_io = now
        if conn.phase is _Phase.HEAD or conn.phase is _Phase.BODY:
            conn.inbuf += data
        # Held or lingering: the connection ends without reading another request; dropped.

    def _expire(self, conn: _Conn, now: float) -> None:
        if conn.out:
            self._close(conn)  # the client stopped reading
        elif conn.phase is _Phase.HOLD:
            held, conn.held = conn.held, None
            if held is not None:
                self._emit(conn, held, now)
            self._advance(conn, now)
        elif conn.phase is _Phase.BODY:
            # Answered rather than just closed: the client learns why (OpenAI's SDKs retry a
            # 408), and a client still dripping its body reads it once it stops to listen.
            self._refuse(conn, api_errors.request_timeout(), now)
            self._advance(conn, now)
        else:
            # A linger ended, a kept-alive connection sat idle, or a head was not complete in
            # time (there is no request to answer yet).
            self._close(conn)

    def _advance(self, conn: _Conn, now: float) -> None:
        """Serve every complete request the buffer holds, in order, then wait for the right event."""
        while not conn.closed and not conn.out and self._step(conn, now):
            pass
        if conn.closed or conn.phase is _Phase.WORK:
            return  # at work: out of the selector, and an EOF waits for the answer (_worked)
        if conn.eof and not conn.out:
            self._close(conn)  # the client is done sending, and has every answer it can get
            return
        mask = selectors.EVENT_WRITE if conn.out else selectors.EVENT_READ
        if mask != conn.mask:
            self._selector.modify(conn.sock, mask, conn)
            conn.mask = mask

    def _step(self, conn: _Conn, now: float) -> bool:
        """Take the current request one phase further; False when more input is needed."""
        try:
            if conn.phase is _Phase.HEAD:
                return self._head(conn, now)
            if conn.phase is _Phase.BODY:
                return self._body(conn, now)
        except _Refused as refused:
            self._refuse(conn, refused.error, now)
            return True
        return False

    # -- requests ----------------------------------------------------------------------------
    def _head(self, conn: _Conn, now: float) -> bool:
        buf = conn.inbuf
        # Empty lines before a request line are ignored (RFC 9112 2.2): a client may send one
        # after a body.
        start = 0
        while start < len(buf) and buf[start] in b"\r\n":
            start += 1
        if start:
            del buf[:start]
            conn.scan = 0
        if not buf:
            return False
        if conn.deadline is None:
            conn.deadline = now + self._deadline_s()  # a kept-alive connection's next request
        found = _HEAD_END.search(buf, conn.scan)
        if found is None:
            conn.scan = max(0, len(buf) - 3)
            if len(buf) > _MAX_LINE and buf.find(b"\n", 0, _MAX_LINE + 1) < 0:
                raise _refusal(414, "the request line is too long")
            if len(buf) > _MAX_HEAD:
                raise _refusal(431, "the request's header fields are too large")
            return False
        head = buf[: found.start()].decode("iso-8859-1")
        del buf[: found.end()]
        conn.scan = 0
        lines = head.split("\n")
        words = lines[0].rstrip("\r").split()
        if len(words) != 3:
            raise _Refused(api_errors.bad_framing(f"malformed request line {lines[0][:64]!r}"))
        method, target, version = words
        match = _VERSION.fullmatch(version)
        if match is None:
            raise _Refused(api_errors.bad_framing(f"malformed HTTP version {version[:16]!r}"))
        if match.group(1) != "1":
            raise _refusal(505, f"HTTP version {version} is not supported")
        if len(lines) - 1 > _MAX_HEADERS:
            raise _refusal(431, "too many header fields")
        fields: dict[str, list[str]] = {}
        for raw in lines[1:]:
            line = raw.rstrip("\r")
            if len(line) > _MAX_LINE:
                raise _refusal(431, "a header field is too long")
            name, colon, value = line.partition(":")
            # A folded line or a space before the colon is refused, as RFC 9112 5 asks.
            if not colon or not name or name != name.strip():
                raise _Refused(api_errors.bad_framing(f"malformed header field {line[:64]!r}"))
            fields.setdefault(name.lower(), []).append(value.strip())
        tokens = {t.strip().lower() for v in fields.get("connection", ()) for t in v.split(",")}
        http11 = match.group(2) != "0"
        conn.keep_alive = "close" not in tokens if http11 else "keep-alive" in tokens
        conn.announce = not http11 and conn.keep_alive
        conn.method, conn.target = method, target
        conn.headers = {name: values[-1] for name, values in fields.items()}
        self._framing(conn, fields)
        conn.phase = _Phase.BODY
        if (http11 and "100-continue" in (v.lower() for v in fields.get("expect", ()))
                and (conn.chunked is not None or len(buf) < conn.length)):
            # The client waits for this before it sends the body (curl does, for a large one).
            self._send(conn, b"HTTP/1.1 100 Continue\r\n\r\n", now)
        return True

    def _framing(self, conn: _Conn, fields: dict[str, list[str]]) -> None:
        """How the body is delimited; raises _Refused for framing a real service refuses."""
        conn.chunked, conn.length = None, 0
        transfer = fields.get("transfer-encoding")
        if transfer is not None:
            # An HTTP/1.1 server must read a chunked body (RFC 9112 7; a streamed upload has no
            # length up front); it overrides any Content-Length (6.3). When chunked is not the
            # final coding, the body's end is unknowable: 400 (6.1).
            codings = ", ".join(transfer)
            if codings.split(",")[-1].strip().lower() != "chunked":
                raise _Refused(api_errors.bad_framing(
                    f"unsupported Transfer-Encoding {codings!r}"))
            conn.chunked = _Chunked(self._max_body, lambda size: self._reserve(conn, size))
            return
        values = fields.get("content-length")
        if not values:
            if conn.method == "POST":
                # Without a length or chunked framing a POST's body cannot be delimited. RFC 9112
                # would read it as empty, but real API front ends (Mistral's API, Google's, IIS
                # on Azure) answer 411 Length Required, and so does the fake: an empty body
                # would otherwise be blamed on the client's JSON.
                raise _Refused(api_errors.length_required())
            return  # a GET, say: no body
        # One value, or a list of identical ones (RFC 9110 8.6); digits only, so no sign, no
        # whitespace inside, no underscores (int() alone would take "-1", " 1_0 ").
        claims = {v.strip().encode("latin-1") for value in values for v in value.split(",")}
        if len(claims) != 1 or not _DIGITS.fullmatch(claim := claims.pop()):
            raise _Refused(api_errors.bad_framing(
                f"invalid Content-Length header: {', '.join(values)!r}"))
        digits = claim.lstrip(b"0")
        # Compared by digit count first: int() refuses a string of over 4300 digits.
        if len(digits) > len(str(self._max_body)) or int(digits or b"0") > self._max_body:
            # Decided from the header alone: nothing of the body is read (what arrives is
            # dropped while the answer lingers), so the fake never spends memory on it.
            raise _Refused(api_errors.body_too_large(self._max_body))
        conn.length = int(digits or b"0")
        self._reserve(conn, conn.length)

    # -- the body budget ---------------------------------------------------------------------
    def _reserve(self, conn: _Conn, size: int) -> None:
        """Take `size` more bytes of the budget for conn's body, or refuse the request (503)."""
        if conn.reserved + size > _SMALL_BODY and self._held + size > self._max_held:
            raise _Refused(api_errors.overloaded(self._max_held))
        conn.reserved += size
        self._held += size

    def _release(self, conn: _Conn) -> None:
        self._held -= conn.reserved
        conn.reserved = 0

    def _body(self, conn: _Conn, now: float) -> bool:
        buf = conn.inbuf
        if conn.chunked is not None:
            body = conn.chunked.feed(buf)
            if body is None:
                return False
            conn.chunked = None
        else:
            if len(buf) < conn.length:
                return False
            body = bytes(buf[: conn.length])
            del buf[: conn.length]
        request = Request(conn.method, conn.target, body, conn.headers)
        if self._offload_over is not None and len(body) > self._offload_over:
            conn.phase = _Phase.WORK
            self._selector.unregister(conn.sock)
            self._worker.submit(conn, request)
            return False
        # The handler's own failure ends the connection unanswered (_guarded), as a crashed
        # handler thread did.
        try:
            reply = self._handler(request)
        finally:
            self._release(conn)
        return self._answer(conn, reply, now)

    def _answer(self, conn: _Conn, reply: Reply, now: float) -> bool:
        if reply.hold_s > 0:
            conn.phase, conn.held, conn.until = _Phase.HOLD, reply, now + reply.hold_s
            return False
        self._emit(conn, reply, now)
        return True

    def _worked(self, conn: _Conn, reply: Reply | None, now: float) -> None:
        """The worker's reply to conn's request (None: its handler failed) goes out, and the
        connection is watched again."""
        self._release(conn)
        if conn.closed:
            return  # stop() came first
        if reply is None:
            self._close(conn)
            return

        def step(conn: _Conn, now: float) -> None:
            conn.mask = selectors.EVENT_READ
            self._selector.register(conn.sock, conn.mask, conn)
            self._answer(conn, reply, now)
            self._advance(conn, now)

        self._guarded(conn, step, now)

    # -- answers -----------------------------------------------------------------------------
    def _refuse(self, conn: _Conn, err: api_errors.ApiError, now: float) -> None:
        # The rest of a refused request cannot be told from the next one: the answer is the last.
        # What it sent is dropped now, not when the connection ends (a client that does not read
        # the answer keeps it open until the socket timeout).
        conn.keep_alive = False
        conn.inbuf.clear()
        conn.chunked = None
        self._release(conn)
        self._emit(conn, Reply(err.status, json.dumps(err.body, ensure_ascii=False).encode()), now)

    def _emit(self, conn: _Conn, reply: Reply, now: float) -> None:
        if reply.status is None:
            if reply.reset:  # linger 0: close() sends RST, the client's read fails at once
                with contextlib.suppress(OSError):
                    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self._close(conn)  # nothing to send: the connection closes after the request
            return
        close = not conn.keep_alive
        lines = [f"HTTP/1.1 {reply.status} {_phrase(reply.status)}", f"Server: {_SERVER}",
                 f"Date: {self._http_date()}", f"Content-Type: {reply.content_type}",
                 f"Content-Length: {len(reply.data)}"]
        if close:
            lines.append("Connection: close")
        elif conn.announce:
            lines.append("Connection: keep-alive")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        conn.phase, conn.deadline, conn.close_after = _Phase.HEAD, None, close
        self._send(conn, head if conn.method == "HEAD" else head + reply.data, now)

    def _send(self, conn: _Conn, data: bytes, now: float) -> None:
        conn.out += data
        conn.last_io = now
        self._flush(conn, now)

    def _flush(self, conn: _Conn, now: float) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)  # the client is gone (a killed agent): no one to answer
            return
        if sent:
            del conn.out[:sent]
            conn.last_io = now
        if not conn.out and conn.close_after and conn.phase is not _Phase.LINGER:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            conn.phase, conn.until = _Phase.LINGER, now + LINGER_S
            conn.inbuf.clear()

    def _close(self, conn: _Conn) -> None:
        if conn.closed:
            return
        conn.closed = True
        if conn.phase is not _Phase.WORK:  # else the worker still holds the body: _worked releases
            self._release(conn)
        conn.inbuf.clear()
        conn.chunked = None
        self._conns.pop(conn.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        conn.sock.close()

    def _http_date(self) -> str:
        second = int(time.time())
        if self._date[0] != second:
            self._date = (second, email.utils.formatdate(second, usegmt=True))
        return self._date[1]


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""

