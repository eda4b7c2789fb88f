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
import socket
import threading
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
    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        parts = urlsplit(config.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"provider URL must be http(s)://host[:port]/path, got {config.base_url!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port
        self._path = parts.path.rstrip("/") + "/chat/completions"

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """One request; returns the first choice's message or raises ProviderError."""
        body: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if tools:
            body["tools"] = tools
        payload = json.dumps(body, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        conn_cls = (
            http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        )
        timeout = self.config.timeout_s
        conn = conn_cls(self._host, self._port, timeout=timeout)
        # The socket timeout bounds each read, not the request: a provider that trickles a byte
        # at a time never trips it. A watchdog shuts the socket at the deadline, which wakes any
        # blocked read wherever http.client is (status line, headers, body).
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            sock = conn.sock  # read once: close() may clear it between a check and a use
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        watchdog = threading.Timer(timeout, expire)
        watchdog.daemon = True
        try:
            # Started before connecting, so connect + send + wait + read share one deadline; a
            # connect still under way when it fires ends by its own timeout, checked below.
            watchdog.start()
            conn.connect()
            if expired.is_set():
                raise TimeoutError
            conn.request("POST", self._path, body=payload, headers=headers)
            resp = conn.getresponse()
            raw = _read_capped(resp)
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


def _read_capped(resp: http.client.HTTPResponse) -> bytes | None:
    """The body, or None when it is larger than MAX_RESPONSE_BYTES (never read whole)."""
    try:
        # `length` is http.client's own parse of Content-Length (None when absent or chunked).
        if resp.length is not None and resp.length > MAX_RESPONSE_BYTES:
            return None
        raw = resp.read(MAX_RESPONSE_BYTES + 1)
        if resp.length:  # a bounded read does not raise when the body stops short; say it here
            raise http.client.IncompleteRead(raw, resp.length)
        return None if len(raw) > MAX_RESPONSE_BYTES else raw
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
