"""The fake downstream's HTTP server on 127.0.0.1: `/<case_key>/<service><path>` for each declared service."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from crashmatrix.fakes import downstream, http1
from crashmatrix.fakes.downstream import Downstream, DownstreamRecord, Fate, Injection
from crashmatrix.fakes.served import Served
from crashmatrix.scenarios.model import Service

# Loopback only, never a parameter: the agent under test reaches it, nothing else should.
HOST = "127.0.0.1"
# Real APIs cap a request well below the provider's 64 MB (Stripe's is far smaller); an email or
# an order is a few KB. A bigger body gets 413 from the HTTP layer and reaches no case's record.
MAX_BODY = 1024 * 1024
# A held reply (the timeout fault) waits for the client to give up, closing its connection; an
# agent whose client never does is stopped by the case's deadline first (a hung agent verdict),
# and its connection closes with it.
HOLD_S = 3600.0


def _json(status: int, data: Any) -> http1.Reply:
    return http1.Reply(status, json.dumps(data, ensure_ascii=False).encode())


class FakeDownstream(Served):
    """The downstream services of many cases at once: each case gets its own services, keys,
    operations and record, under `http://127.0.0.1:PORT/<case_key>/<service>`.

    Use as a context manager, or call start() and stop(). The records are the harness's ground
    truth and live only in this (the harness's) process: the agent can only send requests, each
    request appends one record of its own and answers from the state earlier requests left, and
    no request, header or body can change, remove or renumber a record already made. Requests
    to a case or service not registered get 404 and are recorded nowhere.
    """

    thread_name = "fake-downstream"
    max_body = MAX_BODY

    def __init__(self, port: int = 0) -> None:
        super().__init__((HOST, port))
        self._cases: dict[str, Downstream] = {}
        self._kills: dict[str, Callable[[], None]] = {}  # case key -> what a KILL fate calls
        self._lock = threading.Lock()

    # -- requests ----------------------------------------------------------------------------
    def _answer(self, request: http1.Request) -> http1.Reply:
        """The reply to one whole request (http1 has read its body: refused framing and bodies
        over MAX_BODY never get here, so they are in no record)."""
        path = urlsplit(request.target).path  # a query string is ignored
        parts = path.split("/", 3)  # "", case key, service, the rest of the path
        if len(parts) < 3 or parts[0]:
            return _json(404, downstream.no_route(request.method, path))
        raw_key, name = parts[1], parts[2]
        key = unquote(raw_key)
        with self._lock:
            case = self._cases.get(key)
        if case is None:
            return _json(404, downstream.unknown_case(key))
        if name not in case.services:
            return _json(404, downstream.unknown_service(key, name))
        relative = "/" + parts[3] if len(parts) == 4 else ""
        status, data, _, injection = case.handle(name, request.method, relative, request.headers,
                                                 request.body)
        if injection is None or injection.fate is Fate.ERROR:
            return http1.Reply(status, data)
        if injection.fate is Fate.HOLD:
            return http1.Reply(None, hold_s=HOLD_S)
        if injection.fate is Fate.KILL:
            with self._lock:
                kill = self._kills.get(key)
            if kill is not None:
                kill()  # on this loop's thread: it only signals, so it never blocks the loop
        return http1.Reply(None, reset=True)

    # -- cases -------------------------------------------------------------------------------
    def base_url(self, case_key: str, service: str) -> str:
        """A service's base URL for a case; any string is a valid key (it is URL-quoted)."""
        return f"http://{HOST}:{self.port}/{quote(case_key, safe='')}/{service}"

    def register(self, case_key: str, services: Sequence[Service]) -> dict[str, str]:
        """Serve `services` under `case_key`, with no operations and an empty record; returns
        each service's base URL by name. A key can only be registered once until forgotten."""
        if not case_key:
            raise ValueError("case_key must be a non-empty string")
        case = Downstream(services)
        urls = {name: self.base_url(case_key, name) for name in case.services}
        with self._lock:
            if case_key in self._cases:
                raise ValueError(f"case {case_key!r} is already registered")
            self._cases[case_key] = case
        return urls

    def _case(self, case_key: str) -> Downstream:
        with self._lock:
            case = self._cases.get(case_key)
        if case is None:
            raise KeyError(case_key)
        return case

    def arm(self, case_key: str, seq: int, injection: Injection,
            kill: Callable[[], None] | None = None) -> None:
        """Inject a fault at the case's request number `seq`; `kill`: what a KILL fate calls
        (it must not block: it runs on the server's thread) before the connection closes."""
        case = self._case(case_key)
        with self._lock:
            if kill is None:
                self._kills.pop(case_key, None)
            else:
                self._kills[case_key] = kill
        case.arm(seq, injection)

    def disarm(self, case_key: str) -> DownstreamRecord | None:
        """Disarm the case's fault; the record of the request it was injected at, or None."""
        with self._lock:
            self._kills.pop(case_key, None)
        return self._case(case_key).disarm()

    def records(self, case_key: str) -> list[DownstreamRecord]:
        """The case's downstream requests so far, all services, in arrival order (a copy)."""
        return self._case(case_key).records()

    def applied(self, case_key: str, service: str) -> int:
        """How many business operations the case's `service` has applied."""
        return self._case(case_key).applied(service)

    def forget(self, case_key: str) -> None:
        """Drop a case, its operations and its record; later requests for it get a 404."""
        with self._lock:
            self._cases.pop(case_key, None)
            self._kills.pop(case_key, None)
