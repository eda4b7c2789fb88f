"""OpenAI-compatible chat-completions client: timeouts, and no hidden retries (docs/architecture.md).

Retries are the loop's job, through a durable `retry_pending` record; a client that retried on
its own would hide from the log that a request was sent twice.
"""

from __future__ import annotations

# http.client encodes the host name with the idna codec on every connect, and the codec module
# is imported on first use (~4 ms): imported here, it is part of start-up, which a process forked
# after import (the crash harness's zygote) has already paid.
import contextlib
import encodings.idna  # noqa: F401
import http.client
import json
import select
import socket
import threading
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# A chat completion is a few kB; even a maximal one is well under a megabyte. Reading more is no
# longer a reply but a memory hazard (a 200 MB body once cost 841 MB of RSS and one 200 MB commit).
MAX_RESPONSE_BYTES = 8 << 20


class ProviderError(Exception):
    def __init__(self, reason: str, *, retryable: bool, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.status = status


@dataclass(frozen=True)
class ProviderConfig:
    base_url: str  # e.g. http://127.0.0.1:8080/v1
    api_key: str = ""
    model: str = "crashmatrix-agent"
    timeout_s: float = 60.0


class ProviderClient:
    """Keeps one connection alive across requests (a new one per request cost a handshake and a
    server-side accept each time). An idle connection the server has closed is noticed before
    anything is sent on it and replaced; a request that fails once sent is never resent here."""

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        parts = urlsplit(config.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"provider URL must be http(s)://host[:port]/path, got {config.base_url!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._path = parts.path.rstrip("/") + "/chat/completions"
        # The idle connection, if any; a list so the finalizer below can close whatever it holds
        # without keeping the client alive. Taken out while in use: concurrent calls each get
        # their own connection.
        self._idle: list[http.client.HTTPConnection] = []
        self._idle_lock = threading.Lock()
        # Closed when the client is collected or at exit, before the socket's own finalizer
        # would warn that it was left open.
        weakref.finalize(self, _close_all, self._idle)

    def close(self) -> None:
        """Close the idle connection (the next request opens a new one)."""
        with self._idle_lock:
            _close_all(self._idle)

    def _take(self) -> http.client.HTTPConnection | None:
        with self._idle_lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None and not _still_open(conn):
            conn.close()
            return None
        return conn

    def _keep(self, conn: http.client.HTTPConnection) -> None:
        with self._idle_lock:
            if not self._idle:
                self._idle.append(conn)
                return
        conn.close()

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """One request; returns the first choice's message or raises ProviderError."""
        body: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if tools:
            body["tools"] = tools
        payload = json.dumps(body, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        timeout = self.config.timeout_s
        conn = self._take()
        fresh = conn is None
        if conn is None:
            conn_cls = (
                http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            )
            conn = conn_cls(self._host, self._port, timeout=timeout)
        # The socket timeout bounds each read, not the request: a provider that trickles a byte
        # at a time never trips it. A watchdog shuts the socket at the deadline, which wakes any
        # blocked read wherever http.client is (status line, headers, body).
        expired = threading.Event()
        settled = threading.Lock()  # held by whichever comes first: the watchdog or the answer

        def expire() -> None:
            if not settled.acquire(blocking=False):
                return  # the answer is in: the connection must not be shut under its next request
            expired.set()
            sock = conn.sock  # read once: close() may clear it between a check and a use
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        watchdog = threading.Timer(timeout, expire)
        watchdog.daemon = True
        reusable = False
        try:
            # Started before connecting, so connect + send + wait + read share one deadline; a
            # connect still under way when it fires ends by its own timeout, checked below.
            watchdog.start()
            if fresh:
                conn.connect()
            if expired.is_set():
                raise TimeoutError
            conn.request("POST", self._path, body=payload, headers=headers)
            resp = conn.getresponse()
            raw, reusable = _read_capped(resp)
            status = resp.status
        except TimeoutError:
            raise ProviderError("timeout", retryable=True) from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            if expired.is_set():
                raise ProviderError(f"timeout: no complete response within {timeout:g}s",
                                    retryable=True) from None
            raise ProviderError(f"connection: {exc.__class__.__name__}", retryable=True) from None
        finally:
            watchdog.cancel()
            # Kept only when the watchdog can no longer fire on it and the whole answer was read.
            if reusable and settled.acquire(blocking=False):
                self._keep(conn)
            else:
                conn.close()
        if raw is None:
            # Not retryable: the same request would get the same oversized answer.
            raise ProviderError(f"response body larger than {MAX_RESPONSE_BYTES} bytes",
                                retryable=False, status=status)
        if status == 429 or status >= 500:
            raise ProviderError(f"HTTP {status}", retryable=True, status=status)
        if status != 200:
            detail = raw[:500].decode("utf-8", "replace")
            raise ProviderError(f"HTTP {status}: {detail}", retryable=False, status=status)
        try:
            data = json.loads(raw)
            message: dict[str, Any] = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            raise ProviderError("malformed response body", retryable=False, status=status) from None
        problem = _shape_problem(message)
        if problem:
            # A reply the loop cannot read is the provider's error, said cleanly, not a crash.
            raise ProviderError(f"malformed response body: {problem}", retryable=False, status=status)
        return message


def _close_all(conns: list[http.client.HTTPConnection]) -> None:
    while conns:
        conns.pop().close()


def _still_open(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection can carry a request: nothing may be readable on it. A server
    that closed it (its idle timeout, a restart) shows as readable (EOF or reset); so would stray
    bytes, which would be read as the next answer."""
    sock = conn.sock
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return not poller.poll(0)
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _read_capped(resp: http.client.HTTPResponse) -> tuple[bytes | None, bool]:
    """The body, or None when it is larger than MAX_RESPONSE_BYTES (never read whole); and
    whether the connection may carry another request (the answer was read to its end, and the
    server keeps the connection open)."""
    try:
        # `length` is http.client's own parse of Content-Length (None when absent or chunked).
        if resp.length is not None and resp.length > MAX_RESPONSE_BYTES:
            return None, False
        raw = resp.read(MAX_RESPONSE_BYTES + 1)
        if resp.length:  # a bounded read does not raise when the body stops short; say it here
            raise http.client.IncompleteRead(raw, resp.length)
        if len(raw) > MAX_RESPONSE_BYTES:
            return None, False
        # isclosed(): http.client let go of the body's stream, which it does at the body's end.
        return raw, resp.isclosed() and not resp.will_close
    finally:
        resp.close()  # an unread rest keeps the socket open otherwise (Connection: close)


def _shape_problem(message: Any) -> str | None:
    """What is wrong with an assistant message's shape, or None (the wire's shape, not its sense)."""
    if not isinstance(message, dict):
        return f"the message is {type(message).__name__}, not an object"
    try:  # JSON can escape a lone surrogate, which no commit (UTF-8) can hold
        json.dumps(message, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return "the message holds a lone surrogate (not valid Unicode text)"
    except RecursionError:  # nested nearly as deep as the parser allows: no commit could hold it
        return "the message is nested too deeply"
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        return "content is not a string"
    calls = message.get("tool_calls")
    if calls is None:
        return None
    if not isinstance(calls, list):
        return "tool_calls is not an array"
    seen: set[str] = set()
    for k, c in enumerate(calls):
        function = c.get("function") if isinstance(c, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) \
                or not isinstance(function.get("arguments"), str):
            return f"tool_calls[{k}] has no function name and arguments string"
        # Every call is answered by exactly one tool message naming its id, and recovery pairs
        # intents and results by id: a missing or repeated id cannot be answered one-to-one, so
        # no call of such a reply is run (a history holding it is one the real API refuses).
        call_id = c.get("id")
        if not isinstance(call_id, str) or not call_id:
            return f"tool_calls[{k}] has no id"
        if call_id in seen:
            return f"tool_calls[{k}] repeats the id {call_id!r} of an earlier call"
        seen.add(call_id)
    return None
