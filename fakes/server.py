"""The fake provider's HTTP server on 127.0.0.1: `POST /<case_key><wire suffix>` for each wire."""

from __future__ import annotations

import json
import re
import threading
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from crashmatrix.fakes import api_errors, http1, sse
from crashmatrix.fakes.case import Case, CaseState, Decision
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.fakes.served import Served
from crashmatrix.fakes.wire import Wire
from crashmatrix.fakes.wire_anthropic import ANTHROPIC
from crashmatrix.fakes.wire_chat import CHAT
from crashmatrix.fakes.wire_responses import RESPONSES
from crashmatrix.scenarios.model import ProviderFault, Scenario

# Each wire is served under its own path after the case key (docs/wires.md). A case key
# never holds a "/" once URL-quoted, so the suffix alone tells the wire.
WIRES: tuple[Wire, ...] = (CHAT, RESPONSES, ANTHROPIC)
SUFFIX = CHAT.suffix
# Deeper JSON is refused as unparsable. Python's decoder and encoder recurse, so a body nested
# just under the recursion limit would parse, then crash the handler when the fake encodes it
# again deeper in the stack; real chat requests nest a few levels (tool schemas a few dozen),
# and serde_json, for one, stops at 128 by default.
MAX_JSON_DEPTH = 256
# A body with more arrays and objects than this is refused (413) before it is parsed. Parsing
# costs by the value, not the byte: 8 MiB of `[],` is 2.8 million lists, 0.75 s of the parser
# (which holds the GIL, so even on the worker thread it stalls the loop) and hundreds of MB. A
# real request has a few per message and per tool schema, and 250,000 lists parse in ~80 ms,
# about what 8 MiB of ordinary messages take; a 100,000-message history (the most Anthropic's
# API takes) still fits.
MAX_JSON_CONTAINERS = 250_000
# Bodies bigger than this are parsed and answered on http1's worker thread, not its loop: a
# normal agent request is far smaller, and keeps the loop's ~50 us path.
OFFLOAD_OVER = 256 * 1024
# A JSON string token (the unrolled form: fast on long strings), whose brackets are text.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _too_many_containers(body: bytes) -> bool:
    """Whether the JSON text `body` has more than MAX_JSON_CONTAINERS arrays and objects."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_CONTAINERS:
        return False  # even counting the brackets inside strings, few enough: the usual case
    bare = _STRING.sub(b"", body)  # counted again without the strings' text
    return bare.count(b"[") + bare.count(b"{") > MAX_JSON_CONTAINERS


def _too_deep(body: bytes, payload: Any) -> bool:
    """Whether `payload` nests arrays and objects more than MAX_JSON_DEPTH deep."""
    if body.count(b"[") + body.count(b"{") <= MAX_JSON_DEPTH:
        return False  # too few brackets to nest that deep: skip the walk
    # Level by level, without recursion (it would hit the limit being checked): each pass is one
    # comprehension over a level's containers, several times faster than a walk with a stack.
    level: list[Any] = [payload]
    for _ in range(MAX_JSON_DEPTH):
        level = [c for v in level for c in (v.values() if isinstance(v, dict) else v)
                 if isinstance(c, dict | list)]
        if not level:
            return False
    return True


def _reply(decision: Decision) -> http1.Reply:
    fault = decision.fault
    # A timeout fault holds past the client's timeout: bounded, and cut short by stop().
    hold_s = fault.hold_s if fault is not None and fault.kind is ProviderFault.TIMEOUT else 0.0
    if decision.status is None:
        # No response: the connection closes after the request was read.
        return http1.Reply(None, hold_s=hold_s)
    if decision.events is not None:
        # A streamed answer, sent whole: it is computed before the first byte, and a
        # Content-Length lets the client tell a complete stream from one cut short.
        return http1.Reply(decision.status, sse.encode(decision.events),
                           "text/event-stream; charset=utf-8", hold_s)
    return http1.Reply(decision.status, json.dumps(decision.body, ensure_ascii=False).encode(),
                       hold_s=hold_s)


def _error(err: api_errors.ApiError) -> http1.Reply:
    return _reply(Decision(err.status, err.body))


class FakeProvider(Served):
    """A scripted provider serving many cases at once, on three wires: OpenAI Chat Completions,
    OpenAI Responses and Anthropic Messages (docs/wires.md), one scenario script for all.

    Use as a context manager, or call start() and stop(). Each case gets its own base URL
    (`http://127.0.0.1:PORT/<case_key>/v1`), its own fault schedule and its own request log.
    The HTTP limits (`max_body`, `max_held`, `socket_timeout_s`, `request_deadline_s`) default
    to http1's; see Served.
    """

    thread_name = "fake-provider"
    # Safe beside the loop: cases, their logs and stores are locked (Case is thread-safe).
    offload_over = OFFLOAD_OVER

    def __init__(self, port: int = 0, host: str = "127.0.0.1", *, max_body: int | None = None,
                 max_held: int | None = None, socket_timeout_s: float | None = None,
                 request_deadline_s: float | None = None) -> None:
        super().__init__((host, port), max_body=max_body, max_held=max_held,
                         socket_timeout_s=socket_timeout_s, request_deadline_s=request_deadline_s)
        self._cases: dict[str, Case] = {}
        self._lock = threading.Lock()

    # -- requests ----------------------------------------------------------------------------
    def _answer(self, request: http1.Request) -> http1.Reply:
        """The reply to one whole request (http1 has read its body, as a front end does: every
        answer, 404s included, goes to a client that has finished sending, and no refused
        request reaches a case's log)."""
        path = urlsplit(request.target).path
        if request.method != "POST":
            return _error(api_errors.invalid_url(request.method, path))
        if _too_many_containers(request.body):
            # Refused as the HTTP layer refuses a body too large: in no case's log, in the
            # OpenAI shape, before the costly parse.
            return _error(api_errors.too_many_values(MAX_JSON_CONTAINERS))
        wire = next((w for w in WIRES if path.endswith(w.suffix)), None)
        if wire is None or not path.startswith("/") or len(path) <= len(wire.suffix) + 1:
            return _error(api_errors.invalid_url("POST", path))
        raw_key = path[1 : -len(wire.suffix)]
        if "/" in raw_key:
            return _error(api_errors.invalid_url("POST", path))
        case = self.case(unquote(raw_key))
        if case is None:
            return _error(wire.errors.unknown_case(unquote(raw_key)))
        try:
            payload = json.loads(request.body)
        except (ValueError, RecursionError):
            # RecursionError: deeply nested arrays or objects exhaust the decoder's recursion
            # limit; to the client that is one more body that cannot be parsed.
            return _reply(case.record_unparsable(wire))
        if isinstance(payload, dict | list) and _too_deep(request.body, payload):
            return _reply(case.record_unparsable(wire))
        return _reply(case.handle(payload, wire))

    # -- cases -------------------------------------------------------------------------------
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
