"""intent-before-effect: every effect of a call follows a landed tool_started for it in its run chain."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.transcript import ToolStart, Transcript
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.calls import CallSite, call_table_of
from crashmatrix.harness.verify.durable_commits import Lost, lost_commits_of
from crashmatrix.harness.verify.effects import befores, site_effects_of
from crashmatrix.harness.verify.trace import Located, Trace
from crashmatrix.scenarios.model import Scenario

ID = InvariantId.INTENT_BEFORE_EFFECT
RULE = "the intent must be committed before the tool runs"

# Judged from effect probes: an adapter whose agent reports no `effect.before` gives this check
# nothing to judge (docs/invariants.md says so; no effect means no verdict either way).


def check_intent_before_effect(obs: Observation, scenario: Scenario) -> list[Violation]:
    t = obs.transcript
    trace = Trace.of(obs)
    table = call_table_of(trace)
    effects = site_effects_of(trace)
    lost = lost_commits_of(trace)
    out: list[Violation] = []
    assigned: set[tuple[int, int]] = set()
    for site in table.sites:
        events = befores(effects[site.index])
        assigned.update(e.pos for e in events)
        start = site.start if site.start is not None and _same_chain(t, site, site.start) else None
        landed = trace.commit_pos(start.seq) if start is not None else None
        # A tool_started no probe placed is taken to precede the effect: without commit probes
        # only the existence of the intent is judged.
        early = [e for e in events if (start is None or (landed is not None and landed > e.pos))
                 and not _intent_lost(lost, site.tool, e)]
        if not early:
            continue
        shown = ", ".join(e.text for e in early)
        if start is None:
            why = "no tool_started for it was ever committed"
            if site.start is not None:
                why = (f"its tool_started (commit {site.start.seq}) belongs to run "
                       f"{site.start.run_id}, outside the run chain of the call")
        else:
            at = next((e for e in trace.events if e.pos == landed), None)
            why = (f"its tool_started (commit {start.seq}) landed only later"
                   f"{f', at {at.text}' if at is not None else ''}")
        out.append(Violation(ID, (
            f"{site.name} took effect ({shown}) but {why}; {RULE}"), {
            "call_id": site.call_id, "tool": site.tool, "effects": [e.ref for e in early],
            "recovery": [e.recovery for e in early],
            "start_seq": site.start.seq if site.start is not None else None,
            "start_landed": None if landed is None else f"inc{landed[0]}#{landed[1]}"}))
    for e in befores(trace.effects()):
        if e.pos in assigned or e.call_id is None or _intent_lost(lost, e.label, e):
            continue
        out.append(Violation(ID, (
            f"{e.text} ran call {e.call_id}, but no call {e.call_id} ({e.label}) was committed "
            f"before it, let alone its tool_started; {RULE}"), {
            "call_id": e.call_id, "tool": e.label, "effects": [e.ref], "recovery": [e.recovery],
            "start_seq": None, "start_landed": None}))
    return out


def _intent_lost(lost: list[Lost], tool: str, effect: Located) -> bool:
    """An acknowledged tool_started of this tool, before the effect, that the store lost: the
    intent was there when the tool ran; the loss is durable-commits' to report."""
    part = f"tool_started.{tool}"
    return any(part in x.ack.label.split(",") and x.ack.pos < effect.pos for x in lost)


def _root(t: Transcript, run_id: str) -> str | None:
    """The first run of the chain `run_id` belongs to (None when the store does not know it)."""
    seen: set[str] = set()
    run = t.run(run_id)
    if run is None:
        return None
    while run.resumed_from is not None and run.run_id not in seen:
        seen.add(run.run_id)
        parent = t.run(run.resumed_from)
        if parent is None:
            break
        run = parent
    return run.run_id


def _same_chain(t: Transcript, site: CallSite, start: ToolStart) -> bool:
    """Whether the intent belongs to the run chain of the call (unknown runs are not judged)."""
    a, b = _root(t, site.assistant.run_id), _root(t, start.run_id)
    return a is None or b is None or a == b
