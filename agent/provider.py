"""OpenAI-compatible chat-completions client: timeouts, and no hidden retries (docs/architecture.md).

Retries are the loop's job, through a durable `retry_pending` record; a client that retried on
its own would hide from the log that a request was sent twice.
"""

from __future__ import annotations

# http.client encodes the host name with the idna codec on every connect, and the codec module
# is imported on first use (~4 ms): imported here, it is part of start-up, which a process forked
# after import (the crash harness's zygote) has already paid.
import encodings.idna  # noqa: F401
import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


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
        conn = conn_cls(self._host, self._port, timeout=self.config.timeout_s)
        try:
            conn.request("POST", self._path, body=payload, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            status = resp.status
        except TimeoutError:
            raise ProviderError("timeout", retryable=True) from None
        except (ConnectionError, http.client.HTTPException, OSError) as exc:
            raise ProviderError(f"connection: {exc.__class__.__name__}", retryable=True) from None
        finally:
            conn.close()
        if status == 429 or status >= 500:
            raise ProviderError(f"HTTP {status}", retryable=True, status=status)
        if status != 200:
            detail = raw[:500].decode("utf-8", "replace")
            raise ProviderError(f"HTTP {status}: {detail}", retryable=False, status=status)
        try:
            data = json.loads(raw)
            message: dict[str, Any] = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ProviderError("malformed response body", retryable=False, status=status) from None
        return message
