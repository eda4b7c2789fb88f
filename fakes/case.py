"""One case served by the fake: its scenario, fault schedule and request log; decides each reply."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from crashmatrix.fakes import api_errors
from crashmatrix.fakes.conversation import Conversation
from crashmatrix.fakes.faults import FaultSchedule
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.fakes.response_store import ResponseStore
from crashmatrix.fakes.script import match_rule, reply_message
from crashmatrix.fakes.wire import Refusal, Wire
from crashmatrix.fakes.wire_chat import CHAT, DEFAULT_MODEL
from crashmatrix.scenarios.model import CallIds, Fault, ProviderFault, Scenario

__all__ = ["DEFAULT_MODEL", "Case", "CaseState", "Decision"]


@dataclass(frozen=True)
class Decision:
    """What to send back. `status` None means send nothing (a timeout or drop fault).

    `events`, for a streamed 200, are the server-sent events that carry `body` instead of it.
    """

    status: int | None
    body: dict[str, Any] | None
    fault: Fault | None = None
    events: list[dict[str, Any]] | None = None


def _fault_error(wire: Wire, kind: ProviderFault) -> api_errors.ApiError | None:
    # Faults that answer, in the wire's own error shape; the others (timeout, drop) send nothing.
    if kind is ProviderFault.HTTP_500:
        return wire.errors.server_error()
    if kind is ProviderFault.HTTP_429:
        return wire.errors.rate_limited()
    return None


@dataclass(frozen=True)
class CaseState:
    """Everything a case of the fake has come to: its request log, how often each fault may still
    fire, and its stored responses. A case registered with it answers exactly as the case it was
    taken from would have answered next (the harness starts crash cases from recorded states)."""

    records: tuple[RequestRecord, ...]
    faults_left: tuple[int, ...]
    responses: dict[str, list[Any]]
    # Tool calls answered so far: the next fresh call id (call ids "fresh"); not the log, which
    # only numbers requests, so it stays in the state a crash leaves (states.unlogged).
    issued: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"records": [r.to_json() for r in self.records], "faults_left": list(self.faults_left),
                "responses": self.responses, "issued": self.issued}


class Case:
    """Thread-safe: the server handles requests of one case concurrently."""

    def __init__(self, key: str, scenario: Scenario) -> None:
        self.key = key
        self.scenario = scenario
        self._schedule = FaultSchedule(scenario.faults)
        self._records: list[RequestRecord] = []
        self._lock = threading.Lock()
        self.responses = ResponseStore()
        self._issued = 0  # tool calls answered so far (fresh call ids)

    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def state(self) -> CaseState:
        with self._lock:
            return CaseState(tuple(self._records), self._schedule.left(), self.responses.snapshot(),
                             self._issued)

    def restore(self, state: CaseState) -> None:
        with self._lock:
            self._records = list(state.records)
            self._schedule.restore(state.faults_left)
            self.responses.restore(state.responses)
            self._issued = state.issued

    def record_unparsable(self, wire: Wire = CHAT) -> Decision:
        err = wire.errors.invalid_json()
        self._record(wire, [], [], err.status, error=err.body)
        return Decision(err.status, err.body)

    def handle(self, payload: Any, wire: Wire = CHAT) -> Decision:
        """Validate, maybe inject a fault, else answer from the script; records every request.

        The wire turns the request into the canonical (Chat-Completions-shaped) view, which is
        what the script and the fault schedule judge and what the record keeps; only the answer
        is in the wire's own shape.
        """
        request = wire.parse(payload, self.responses)
        if isinstance(request, Refusal):
            refused = request.error
            self._record(wire, request.messages, request.tools, refused.status,
                         error=refused.body, pairing=request.pairing)
            return Decision(refused.status, refused.body)
        messages, tools = request.messages, request.tools
        conv = Conversation(messages, self.scenario.provider.unknown_marker)
        # The schedule is consulted under the case lock too, so the record order is the order
        # in which faults were taken: the log alone explains which request got which fault.
        with self._lock:
            fault = self._schedule.take(conv)
            if fault is not None:
                err = _fault_error(wire, fault.kind)
                body = err.body if err else None
                status = err.status if err else None
                self._append(wire, messages, tools, status, fault=fault.kind.value, error=body)
                return Decision(status, body, fault)
        rule = match_rule(self.scenario, conv)
        if rule is None:
            gap = wire.errors.script_gap(self.scenario.name)
            self._record(wire, messages, tools, gap.status, error=gap.body)
            return Decision(gap.status, gap.body)
        fresh = self.scenario.provider.call_ids is CallIds.FRESH
        with self._lock:
            issued = self._issued
            # Counted only where ids depend on it: elsewhere the state a crash leaves (and so
            # which crash points share a recovery, under --states) stays what it was.
            self._issued += len(rule.reply.tool_calls) if fresh else 0
        message = reply_message(rule.reply, conv, self.scenario.provider.call_ids, wire.call_id, issued)
        rendered = wire.render(message, request, self.responses)
        self._record(wire, messages, tools, 200, rule=rule.name, reply=message)
        return Decision(200, rendered.body, events=rendered.events)

    def _record(self, wire: Wire, messages: list[Any], tools: list[str], status: int | None,
                **extra: Any) -> None:
        with self._lock:
            self._append(wire, messages, tools, status, **extra)

    def _append(self, wire: Wire, messages: list[Any], tools: list[str], status: int | None,
                **extra: Any) -> None:
        self._records.append(RequestRecord(len(self._records), messages, tools, status,
                                           wire=wire.name, **extra))
