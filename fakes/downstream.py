"""The fake downstream service's rules, per case: operations, idempotency keys, status queries, records."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, NamedTuple
from urllib.parse import unquote

from crashmatrix.scenarios.model import Service

# Deeper JSON is refused (400) before it is stored: a downstream body nests a few levels, and a
# record must stay encodable by json.dumps wherever the harness writes it (the encoder recurses).
MAX_JSON_DEPTH = 64
_PLACEHOLDER = re.compile(r"\{(id|key|ref)\}")


class Outcome(StrEnum):
    """What one request did at the downstream; only `applied` performed a business operation."""

    APPLIED = "applied"  # a new operation: 201 with the endpoint's rendered response
    REPLAYED = "replayed"  # a seen key, the same body: the first answer again, nothing applied
    CONFLICT = "conflict"  # a seen key, another body: 422, nothing applied
    STATUS = "status"  # a status query that found its operation: 200
    NOT_FOUND = "not_found"  # a status query that found no operation: 404
    NO_ROUTE = "no_route"  # a path the service lacks: 404 (no status query, whatever it asked)
    REFUSED = "refused"  # a bad request (400) or a method the path does not take (405)
    FAILED = "failed"  # a 5xx injected before the request was processed: nothing applied


class Fate(StrEnum):
    """What an injected fault does to the reply of the request it is at (the harness's faults
    at downstream requests: harness/faults/downstream.py)."""

    RESET = "reset"  # no reply: the connection is reset (the classic unknown outcome)
    ERROR = "error"  # a 5xx error reply
    HOLD = "hold"  # no reply until the client gives up (a timeout); then the connection closes
    KILL = "kill"  # the agent is killed before the reply reaches it; the connection closes


@dataclass(frozen=True)
class Injection:
    """A fault armed at one request of a case: whether the request is processed first (an
    operation applied, replayed or found), then what happens to its reply."""

    fault: str  # the fault kind's name, recorded with the request
    applies: bool
    fate: Fate
    status: int = 503  # the reply's status, for Fate.ERROR (and what a FAILED request records)


@dataclass(frozen=True)
class DownstreamRecord:
    """One request the downstream answered: the ground truth the invariants count from."""

    seq: int  # 1-based position among the case's downstream requests, all services, arrival order
    service: str
    method: str
    path: str  # relative to the service's base URL, as sent (query string dropped)
    # The dedup key as sent (header or body field; None when the request carried none), or the
    # key (or, by {ref}, the reference) a status query asked for.
    key: str | None
    body: Any  # the parsed JSON body; None when empty or not JSON
    outcome: Outcome
    status: int | None  # the reply's status; None: no reply reached the client (a fault)
    op: str | None  # the operation applied, replayed or found by a status query ("op_1", ...)
    fault: str | None = None  # the fault injected at this request, if any
    # create (to the create endpoint), status (a status query) or other (refused, no route):
    # with the service, the crash point a fault at this request names (`d01:create:mail`).
    kind: str = "other"

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["outcome"] = self.outcome.value
        return data


class Answer(NamedTuple):
    status: int | None  # None: no reply is sent (an injected fault)
    data: Any  # the JSON response
    record: DownstreamRecord


class _Op(NamedTuple):
    id: str
    key: str | None
    ref: str | None  # the service's reference field, as the body that applied it held it
    fingerprint: str  # the canonical JSON of the body that applied it
    response: str  # kept as JSON text: every answer decodes a fresh copy, none can alter it


class _BadRequest(Exception):
    pass


def _error(message: str, type_: str, **extra: Any) -> dict[str, Any]:
    # The shape most JSON APIs share (Stripe's, OpenAI's): one `error` object with a message.
    return {"error": {"message": f"crashmatrix fake downstream: {message}", "type": type_, **extra}}


def unknown_case(key: str) -> dict[str, Any]:
    return _error(f"no case registered under {key!r}", "not_found")


def unknown_service(key: str, name: str) -> dict[str, Any]:
    return _error(f"case {key!r} declares no service {name!r}", "not_found")


def no_route(method: str, path: str) -> dict[str, Any]:
    return _error(f"no route for {method} {path}", "not_found")


def _injected_error(injection: Injection) -> dict[str, Any]:
    return _error(f"service unavailable (injected by crashmatrix: fault {injection.fault})",
                  "server_error")


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's decoder would take them, and NaN != NaN would make
    # a replay of the same body a conflict.
    raise ValueError(f"{name} is not JSON")


def _too_deep(value: Any) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:  # its own stack: recursion is what the limit guards against
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def _parse(body: bytes) -> Any:
    """The JSON body; raises _BadRequest when it is not JSON (or nests too deep)."""
    try:
        payload = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:  # ValueError: also bad UTF-8, huge integers
        raise _BadRequest("the request body is not valid JSON") from exc
    if isinstance(payload, dict | list) and _too_deep(payload):
        raise _BadRequest(f"the request body nests deeper than {MAX_JSON_DEPTH} levels")
    return payload


def _render(template: Any, values: Mapping[str, str]) -> Any:
    """The response template with {id} and {key} filled in its string values, at any depth."""
    if isinstance(template, str):
        # One pass: a key that itself reads "{id}" is not filled in again.
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
    if isinstance(template, Mapping):
        return {name: _render(value, values) for name, value in template.items()}
    if isinstance(template, list | tuple):
        return [_render(value, values) for value in template]
    return template


class ServiceState:
    """One declared service in one case: the operations it applied and the keys it has seen.

    Not thread-safe on its own: Downstream serialises the requests of a case. Deterministic: no
    clock, no randomness; operation ids count the service's applied operations (op_1, op_2, ...).
    """

    def __init__(self, service: Service) -> None:
        self.service = service
        self._ops: dict[str, _Op] = {}  # by operation id, in the order applied
        self._by_key: dict[str, _Op] = {}
        self._by_ref: dict[str, _Op] = {}
        self._status: tuple[str, str, str] | None = None  # prefix, placeholder, suffix
        if service.status is not None:
            found = _PLACEHOLDER.search(service.status)
            if found is None:  # the model's pattern requires one; a hand-built Service may not
                raise ValueError(f"status path {service.status!r} has no {{key}} or {{id}}")
            self._status = (service.status[: found.start()], found.group(1),
                            service.status[found.end() :])

    @property
    def applied(self) -> int:
        return len(self._ops)

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes, *,
               seq: int = 1, injection: Injection | None = None) -> Answer:
        """Answer one request (`path` relative to the service's base URL) and record it as the
        case's request number `seq`; `injection`: the fault armed at it."""
        create = self.service.create
        key: str | None = None
        payload: Any = None
        unparsable: _BadRequest | None = None
        op: _Op | None = None
        if body:
            try:
                payload = _parse(body)
            except _BadRequest as bad:
                unparsable = bad  # recorded with body None; only the create call needs a body
        status_match = self._status_value(path)
        status: int | None
        kind = "other"
        try:
            if method == create.method and path == create.path:
                kind = "create"
                key = self._header_key(headers)
                if unparsable is not None:
                    raise unparsable
                if not isinstance(payload, dict):
                    raise _BadRequest("the request body must be a JSON object")
                if self.service.dedup.where == "body":
                    key = self._body_key(payload)
                if injection is not None and not injection.applies:
                    outcome, status, data = self._failed(injection)
                else:
                    outcome, status, data, op = self._create(key, payload)
            elif status_match is not None and method == "GET":
                kind = "status"
                by, value = status_match
                key = None if by == "id" else value
                if injection is not None and not injection.applies:
                    outcome, status, data = self._failed(injection)
                else:
                    op = {"key": self._by_key, "ref": self._by_ref, "id": self._ops}[by].get(value)
                    if op is None:
                        outcome, status = Outcome.NOT_FOUND, 404
                        data = _error(f"no operation with {by} {value!r}", "not_found")
                    else:
                        outcome, status, data = Outcome.STATUS, 200, json.loads(op.response)
            elif path == create.path or status_match is not None:
                outcome, status = Outcome.REFUSED, 405
                data = _error(f"{method} is not allowed on {path}", "invalid_request_error")
            else:
                outcome, status, data = Outcome.NO_ROUTE, 404, no_route(method, path)
        except _BadRequest as bad:
            outcome, status = Outcome.REFUSED, 400
            data = _error(str(bad), "invalid_request_error")
        if injection is not None and injection.fate is Fate.ERROR:
            status, data = injection.status, _injected_error(injection)
        elif injection is not None and injection.fate is not Fate.ERROR:
            status = None  # the request was processed (or not); its reply never arrives
        record = DownstreamRecord(seq, self.service.name, method, path, key, payload, outcome,
                                  status, op.id if op is not None else None,
                                  injection.fault if injection is not None else None, kind)
        return Answer(status, data, record)

    @staticmethod
    def _failed(injection: Injection) -> tuple[Outcome, int, Any]:
        return Outcome.FAILED, injection.status, _injected_error(injection)

    def _create(self, key: str | None, payload: dict[str, Any]
                ) -> tuple[Outcome, int, Any, _Op | None]:
        # Canonical, so a client that re-serialises the same body (another key order, other
        # spacing) replays; and 1, 1.0 and true stay different, as they are in JSON.
        fingerprint = json.dumps(payload, sort_keys=True, separators=(",", ":"),
                                 ensure_ascii=False)
        seen = self._by_key.get(key) if key is not None else None
        if seen is not None:
            if seen.fingerprint != fingerprint:
                # 422, as the IETF Idempotency-Key draft gives it (Stripe's wording).
                return Outcome.CONFLICT, 422, _error(
                    "Keys for idempotent requests can only be used with the same parameters they "
                    f"were first used with. Try using a key other than {key!r} if you meant to "
                    "execute a different request.", "idempotency_error", key=key), None
            # The first answer again, status included, as Stripe replays it: the client cannot
            # tell a replay from the first response, which is the point of the key.
            return Outcome.REPLAYED, 201, json.loads(seen.response), seen
        op_id = f"op_{len(self._ops) + 1}"
        ref = self._reference(payload)
        response = _render(self.service.create.response,
                           {"id": op_id, "key": key or "", "ref": ref or ""})
        op = _Op(op_id, key, ref, fingerprint, json.dumps(response, ensure_ascii=False))
        self._ops[op_id] = op
        if key is not None:
            self._by_key[key] = op
        if ref is not None:
            # The first operation under a reference is the one a query finds: a second one under
            # it is the double the query was there to prevent.
            self._by_ref.setdefault(ref, op)
        return Outcome.APPLIED, 201, response, op

    def _reference(self, payload: dict[str, Any]) -> str | None:
        """The body's reference field (`Service.reference`) as text, or None."""
        name = self.service.reference
        value = payload.get(name) if name is not None else None
        if value is None or value == "" or isinstance(value, bool | dict | list):
            return None
        return value if isinstance(value, str) else json.dumps(value)

    def _header_key(self, headers: Mapping[str, str]) -> str | None:
        dedup = self.service.dedup
        if dedup.where != "header" or dedup.name is None:
            return None
        wanted = dedup.name.lower()
        value = None
        for name, field in headers.items():  # any case; http1 already lower-cases them
            if name.lower() == wanted:
                value = field
        return value or None  # an empty key is no key: the request is a new operation

    def _body_key(self, payload: dict[str, Any]) -> str | None:
        value = payload.get(self.service.dedup.name or "")
        if value is None or value == "":
            return None  # no key: the request is a new operation
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _BadRequest(f"{self.service.dedup.name!r} must be a string or a number")
        return value if isinstance(value, str) else json.dumps(value)

    def _status_value(self, path: str) -> tuple[str, str] | None:
        """("key", "ref" or "id", the value) when `path` is the service's status query, else None."""
        if self._status is None:
            return None
        prefix, by, suffix = self._status
        if (len(path) <= len(prefix) + len(suffix) or not path.startswith(prefix)
                or not path.endswith(suffix)):
            return None
        raw = path[len(prefix) : len(path) - len(suffix)]
        if "/" in raw:
            return None
        return by, unquote(raw)  # a key holding "/" or spaces is sent percent-encoded


class Downstream:
    """One case's downstream services and the record of every request they answered.

    Thread-safe: requests are handled one at a time, so the record order is the order in which
    they were answered, and `seq` numbers them across all the case's services.
    """

    def __init__(self, services: Sequence[Service]) -> None:
        self._states: dict[str, ServiceState] = {}
        for service in services:
            if service.name in self._states:
                raise ValueError(f"service {service.name!r} is declared twice")
            self._states[service.name] = ServiceState(service)
        self._records: list[DownstreamRecord] = []
        self._lock = threading.Lock()
        self._armed: tuple[int, Injection] | None = None
        self._fired: DownstreamRecord | None = None

    @property
    def services(self) -> tuple[str, ...]:
        """The service names, in the order declared."""
        return tuple(self._states)

    def arm(self, seq: int, injection: Injection) -> None:
        """Inject `injection` at the case's request number `seq` (one armed fault at a time)."""
        with self._lock:
            self._armed, self._fired = (seq, injection), None

    def disarm(self) -> DownstreamRecord | None:
        """Disarm; the record of the request the fault was injected at, or None if none came."""
        with self._lock:
            fired, self._armed, self._fired = self._fired, None, None
        return fired

    def handle(self, service: str, method: str, path: str, headers: Mapping[str, str],
               body: bytes) -> tuple[int | None, bytes, DownstreamRecord, Injection | None]:
        """Answer one request to `service` (KeyError when undeclared); returns the status (None:
        no reply, a fault), the JSON response body, the request's record and the fault injected
        at it, if any (its fate is the caller's to carry out)."""
        state = self._states[service]
        with self._lock:
            seq = len(self._records) + 1
            armed = self._armed
            injection = armed[1] if armed is not None and armed[0] == seq else None
            answer = state.handle(method, path, headers, body, seq=seq, injection=injection)
            self._records.append(answer.record)
            if injection is not None:
                self._fired = answer.record
        data = json.dumps(answer.data, ensure_ascii=False).encode()
        return answer.status, data, answer.record, injection

    def records(self) -> list[DownstreamRecord]:
        """Every request so far, all services, in arrival order (a copy)."""
        with self._lock:
            return list(self._records)

    def applied(self, service: str) -> int:
        """How many business operations `service` has applied (KeyError when undeclared)."""
        state = self._states[service]
        with self._lock:
            return state.applied
