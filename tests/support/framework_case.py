"""Builds the observation of a framework agent's case by hand: no intent records (no tool_started),
a tool of the user's own (`send_email`), effects seen by probes and, in the workspace, the records
the tool wrote. What a LangGraph or Agents SDK app killed after its tool ran looks like."""

from __future__ import annotations

import json
import tomllib
from typing import Any

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.observation import DownstreamRequest, IncarnationRecord, Observation
from crashmatrix.harness.records.transcript import Call, Message, Run, Transcript
from crashmatrix.scenarios.model import Scenario
from crashmatrix.scenarios.schema import parse_scenario

EMAIL = {"to": "ana@example.com", "subject": "Your refund", "body": "On its way."}

REFUND = """
task = "Order A-1001: tell the customer their refund is on its way."
[workspace]
"orders.json" = '{"A-1001": {"customer": "ana@example.com"}}'
[tools]
enabled = ["lookup_order", "send_email"]
policies = { lookup_order = "read-only", send_email = "%(policy)s" }
[[script]]
when.results = { lookup_order = "none" }
reply.tool_calls = [{ tool = "lookup_order", args = { order_id = "A-1001" } }]
[[script]]
when.results = { send_email = "none" }
[[script.reply.tool_calls]]
tool = "send_email"
args = { to = "ana@example.com", subject = "Your refund", body = "On its way." }
[[script]]
reply.final = "Emailed ana@example.com."
%(expect)s
"""

RECORDS = """
[[expect.records]]
path = "outbox.jsonl"
tool = "send_email"
where = { to = "ana@example.com", subject = "Your refund" }
count = 1
"""


def refund_scenario(policy: str = "idempotent", expect: str = RECORDS, source: str = "refund.toml"
                    ) -> Scenario:
    return parse_scenario(tomllib.loads(REFUND % {"policy": policy, "expect": expect}),
                          source=source, default_name="refund")


def outbox(records: int, **fields: Any) -> str:
    """`records` lines of outbox.jsonl, each a sent email with its own timestamp."""
    return "".join(json.dumps({**EMAIL, **fields, "sent_at": f"2026-12-04T18:00:0{k}Z"}) + "\n"
                   for k in range(records))


def _commit(events: list[ProbeEvent], seq: int, label: str) -> None:
    for kind in ("commit.before", "commit.written", "commit.after"):
        events.append(ProbeEvent(len(events) + 1, kind, label, {"seq": seq}))


def _effect(events: list[ProbeEvent], tool: str, call_id: str) -> None:
    for kind in ("effect.before", "effect.after"):
        events.append(ProbeEvent(len(events) + 1, kind, tool, {"call_id": call_id}))


def refund_case(*, emails_sent: int, records: int, lookups: int = 1, policies: dict[str, str] | None = None
                ) -> Observation:
    """Looked the order up `lookups` times and ran send_email `emails_sent` times (the first
    incarnation killed after the last effect it ran before its result was saved), leaving
    `records` records in outbox.jsonl; the store holds one call of each and the final answer."""
    registered = policies or {"lookup_order": "read-only", "send_email": "idempotent"}
    calls = [Call("call_0", "lookup_order", {"order_id": "A-1001"}, '{"order_id": "A-1001"}'),
             Call("call_1", "send_email", dict(EMAIL), json.dumps(EMAIL))]
    messages = [Message(1, "m1", "run-1", "user", "Order A-1001: ..."),
                Message(2, "m2", "run-1", "assistant", None, calls[:1]),
                Message(3, "m3", "run-1", "tool", '{"customer": "ana@example.com"}', call_id="call_0",
                        tool="lookup_order"),
                Message(4, "m4", "run-1", "assistant", None, calls[1:]),
                Message(5, "m5", "run-1", "tool", "sent", call_id="call_1", tool="send_email"),
                Message(6, "m6", "run-1", "assistant", "Emailed ana@example.com.")]
    first: list[ProbeEvent] = []
    _commit(first, 1, "input")
    _commit(first, 2, "reply")
    _effect(first, "lookup_order", "call_0")
    second: list[ProbeEvent] = []
    target = first if lookups == 1 else second
    for _ in range(lookups - 1):
        _effect(second, "lookup_order", "call_0")
    _commit(target, 3, "tools")
    _commit(target, 4, "reply")
    _effect(target, "send_email", "call_1")
    for _ in range(emails_sent - 1):
        _effect(second, "send_email", "call_1")
    crashed = emails_sent > 1 or lookups > 1
    _commit(second if crashed else first, 5, "tools")
    _commit(second if crashed else first, 6, "reply")
    incs = [IncarnationRecord(1, "run", dict(registered), first, crashed_at=len(first) if crashed else None,
                              exit_code=None if crashed else 0),
            IncarnationRecord(2, "recover", dict(registered), second, exit_code=0, settle=not crashed)]
    transcript = Transcript(runs=[Run("run-1", 1, "prompt", outcome="completed", finished_seq=6)],
                            messages=messages, commits=6)
    before = {"orders.json": '{"A-1001": {"customer": "ana@example.com"}}'}
    after = dict(before)
    if records:
        after["outbox.jsonl"] = outbox(records)
    return Observation(Case("refund"), incs, transcript, [], before, after,
                       declared_not_applicable={"intent-before-effect": "a framework records no intent"})


KEYED_MAIL = """
[[services]]
name = "mail"
create = { path = "/messages" }
dedup = "header:Idempotency-Key"
tool = "send_email"
"""

UNKEYED_MAIL = """
[[services]]
name = "mail"
create = { path = "/messages" }
dedup = "none"
status = "/messages/{id}"
tool = "send_email"
"""


def sent(*requests: tuple[str, str | None, int]) -> list[DownstreamRequest]:
    """Downstream records: (outcome, key, incarnation) each; ops numbered as the service would."""
    out, applied = [], 0
    for seq, (outcome, key, inc) in enumerate(requests, 1):
        if outcome == "applied":
            applied += 1
        query = outcome in ("status", "not_found")
        method, path = ("GET", "/messages/op_1") if query else ("POST", "/messages")
        op = f"op_{applied}" if outcome in ("applied", "replayed") else None
        out.append(DownstreamRequest(seq, "mail", method, path, key, outcome, 201, op, inc))
    return out


def mailed(service: str, *requests: tuple[str, str | None, int], emails_sent: int = 2
           ) -> tuple[Observation, Scenario]:
    """The refund case whose send_email posted to a downstream mail service, as `requests`."""
    obs = refund_case(emails_sent=emails_sent, records=0)
    obs.downstream = sent(*requests)
    return obs, refund_scenario(expect=service)
