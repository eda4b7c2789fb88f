"""A case's timeline for `repro`: events, commits, requests, effects, deliveries, output, violations."""

from __future__ import annotations

import json
from typing import Any

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.reports import cause
from crashmatrix.reports.agent_output import tails


def _short(text: Any, width: int = 90) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _last_message(messages: list[dict[str, Any]]) -> str:
    if not messages:
        return "(empty)"
    m = messages[-1]
    if m.get("role") == "tool":
        return f"tool {m.get('tool_call_id')}: {_short(m.get('content'), 60)}"
    return f"{m.get('role')}: {_short(m.get('content'), 60)}"


def render(obs: Observation, result: CaseResult) -> list[str]:
    lines = [f"case {result.case}: {result.verdict.value.upper()}"]
    deliveries = {(d.incarnation, d.event_n): d for d in obs.deliveries}
    requests = iter(obs.requests)
    for inc in obs.incarnations:
        crashed_settle = obs.case.crashes_settle and inc.index == obs.case.depth + 1
        tag = "settle" if inc.settle else "settle, crashed" if crashed_settle else inc.command
        policies = ",".join(f"{t}={p}" for t, p in sorted(inc.policies.items()))
        lines.append(f"-- incarnation {inc.index} ({tag}; {policies})")
        for e in inc.events:
            detail = ""
            if e.kind.startswith("commit."):
                detail = f" seq={e.detail.get('seq')}"
            elif e.kind.startswith("effect."):
                detail = f" call={e.detail.get('call_id')}" + (" RERUN" if e.detail.get("recovery") else "")
            lines.append(f"   {e.n:3d}  {e.point}{detail}")
            if e.kind == "provider.before":
                req = next(requests, None)
                if req is not None:
                    fault = f" fault={req.fault}" if req.fault else ""
                    lines.append(f"        request #{req.index}: HTTP {req.status}{fault}; "
                                 f"{len(req.messages)} messages, last {_last_message(req.messages)}")
            d = deliveries.get((inc.index, e.n))
            if d is not None:
                lines.append(f"        >> delivered {d.kind} {d.item_id} {_short(d.text, 50)}")
            if inc.crashed_at == e.n:
                lines.append("        XX SIGKILL here" + (" (observed by strace)" if inc.observed else ""))
                lines += [f"        XX {note}" for note in inc.fault_notes]
        if inc.killed_at_call:  # killed by strace entering a system call, at no probe event
            how = "strace" if obs.probes else "strace; no probes ran"
            lines.append(f"   XX SIGKILL entering {inc.killed_at_call} ({how})")
            lines += [f"   XX {note}" for note in inc.fault_notes]
        if inc.killed_at_request:  # killed by the fake downstream's fault, the reply unsent
            lines.append(f"   XX SIGKILL at {inc.killed_at_request}, before its reply")
        elif inc.downstream_fault:  # the downstream lost, failed or held a reply; it ran on
            lines.append(f"   XX {inc.downstream_fault}")
        if inc.injected:  # a storage call strace made fail (to stop at) or come up short (to finish)
            lines.append(f"   XX {'failed' if inc.must_stop else 'cut short'} by strace: {inc.injected}")
            lines += [f"   XX {note}" for note in inc.fault_notes]
        if inc.nondeterministic:
            lines.append(f"   !! nondeterministic: {inc.nondeterministic}")
        if inc.protocol_error is not None:
            lines.append(f"   !! killed: it broke the probe protocol: {inc.protocol_error}")
        elif inc.runaway is not None:
            lines.append(f"   !! killed at event {inc.runaway}: over the step bound (--max-events "
                         f"{inc.runaway - 1})")
        elif inc.timed_out:
            lines.append("   !! timed out (killed)")
        elif inc.exit_code is not None:
            lines.append(f"   exit code {inc.exit_code}")
    # What the agent said, after what it did: an agent that cannot start says why only here.
    for tail in tails(result):
        lines.append(f"-- agent output (inc{tail.incarnation}, last lines; stdout and stderr)")
        lines.extend(f"   | {line}" for line in tail.text.split("\n"))
    lines.append("-- store")
    for m in obs.transcript.messages:
        lines.append(f"   commit {m.seq:3d} {m.line(_short)}")
    for r in obs.transcript.runs:
        lines.append(f"   run {r.run_id} ({r.intent}) -> {r.outcome or 'OPEN'}"
                     + (f" ({r.reason})" if r.reason else ""))
    changed = {p: t for p, t in obs.workspace_after.items() if obs.workspace_before.get(p) != t}
    if obs.downstream:
        lines.append("-- downstream (each service's own record)")
        for sent in obs.downstream:
            op = f" {sent.op}" if sent.op else ""
            status = "no reply" if sent.status is None else sent.status
            fault = f" [fault {sent.fault}]" if sent.fault else ""
            lines.append(f"   #{sent.seq} inc{sent.incarnation} {sent.service} {sent.method} {sent.path} "
                         f"key={sent.key or 'none'} -> {status} {sent.outcome}{op}{fault}")
    lines.append("-- workspace changes")
    for path, text in sorted(changed.items()):
        lines.append(f"   {path}:")
        lines.extend(f"     | {line}" for line in text.splitlines()[:20])
    if result.scenario_error:
        lines.append("-- the scenario is wrong")
        lines.extend(f"   {line}" for line in cause.lines(result))
    if result.violations:
        lines.append("-- violated")
        for v in result.violations:
            lines.append(f"   {v['invariant']}: {v['message']}")
            if v.get("evidence"):
                lines.append(f"      evidence: {json.dumps(v['evidence'], ensure_ascii=False)}")
    elif not result.scenario_error:
        lines.append("-- every invariant held" if not result.not_applicable
                     else "-- every judged invariant held")
    if result.not_applicable:
        lines.append("-- not judged for this agent (never counted as held)")
        lines.extend(f"   {n['invariant']}: {n['reason']}" for n in result.not_applicable)
    return lines
