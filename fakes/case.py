"""One case served by the fake: its scenario, fault schedule and request log; decides each reply."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from crashmatrix.fakes import api_errors
from crashmatrix.fakes.conversation import Conversation
from crashmatrix.fakes.faults import FaultSchedule
from crashmatrix.fakes.pairing import check_pairing
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.fakes.script import completion, match_rule, reply_message
from crashmatrix.scenarios.model import Fault, ProviderFault, Scenario

DEFAULT_MODEL = "crashmatrix-fake"


# Faults that answer; the others (timeout, drop) send nothing at all.
_FAULT_ERRORS = {ProviderFault.HTTP_500: api_errors.server_error,
                 ProviderFault.HTTP_429: api_errors.rate_limited}


@dataclass(frozen=True)
class Decision:
    """What to send back. `status` None means send nothing (a timeout or drop fault)."""

    status: int | None
    body: dict[str, Any] | None
    fault: Fault | None = None


def _tool_names(tools: Any) -> list[str]:
    names: list[str] = []
    for t in tools if isinstance(tools, list) else []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


def _shape_error(payload: Any) -> api_errors.ApiError | None:
    if not isinstance(payload, dict):
        return api_errors.invalid_messages("The request body must be a JSON object.", "body")
    messages = payload.get("messages")
    if not isinstance(messages, list):
        return api_errors.invalid_messages("'messages' is a required property")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return api_errors.invalid_messages(
                f"Invalid value for 'messages[{i}]': expected an object with a 'role'.",
                f"messages.[{i}].role")
    return None


class Case:
    """Thread-safe: the server handles requests of one case concurrently."""

    def __init__(self, key: str, scenario: Scenario) -> None:
        self.key = key
        self.scenario = scenario
        self._schedule = FaultSchedule(scenario.faults)
        self._records: list[RequestRecord] = []
        self._lock = threading.Lock()

    def records(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def record_unparsable(self) -> Decision:
        err = api_errors.invalid_json()
        self._record([], [], err.status, error=err.body)
        return Decision(err.status, err.body)

    def handle(self, payload: Any) -> Decision:
        """Validate, maybe inject a fault, else answer from the script; records every request."""
        shape = _shape_error(payload)
        if shape is not None:
            raw = payload.get("messages") if isinstance(payload, dict) else None
            self._record(raw if isinstance(raw, list) else [], [], shape.status,
                         error=shape.body)
            return Decision(shape.status, shape.body)
        messages: list[Any] = payload["messages"]
        tools = _tool_names(payload.get("tools"))
        pairing = check_pairing(messages)
        if pairing is not None:
            self._record(messages, tools, pairing.status, error=pairing.body)
            return Decision(pairing.status, pairing.body)
        conv = Conversation(messages, self.scenario.provider.unknown_marker)
        # The schedule is consulted under the case lock too, so the record order is the order
        # in which faults were taken: the log alone explains which request got which fault.
        with self._lock:
            fault = self._schedule.take(conv)
            if fault is not None:
                err = _FAULT_ERRORS[fault.kind]() if fault.kind in _FAULT_ERRORS else None
                body = err.body if err else None
                status = err.status if err else None
                self._append(messages, tools, status, fault=fault.kind.value, error=body)
                return Decision(status, body, fault)
        rule = match_rule(self.scenario, conv)
        if rule is None:
            gap = api_errors.script_gap(self.scenario.name)
            self._record(messages, tools, gap.status, error=gap.body)
            return Decision(gap.status, gap.body)
        message = reply_message(rule.reply, conv, self.scenario.provider.call_ids)
        model = payload.get("model") if isinstance(payload.get("model"), str) else DEFAULT_MODEL
        self._record(messages, tools, 200, rule=rule.name, reply=message)
        return Decision(200, completion(message, messages, model))

    def _record(self, messages: list[Any], tools: list[str], status: int | None,
                **extra: Any) -> None:
        with self._lock:
            self._append(messages, tools, status, **extra)

    def _append(self, messages: list[Any], tools: list[str], status: int | None,
                **extra: Any) -> None:
        self._records.append(RequestRecord(len(self._records), messages, tools, status, **extra))
