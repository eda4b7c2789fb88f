"""safe-rerun: only a call recorded safe whose tool is registered safe now (or a tool declared
read-only or idempotent, by an agent that recorded no policy) may be run again."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.calls import call_table_of
from crashmatrix.harness.verify.effects import incarnations_of, site_effects_of, site_policy
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Policy, Scenario

ID = InvariantId.SAFE_RERUN
RERUN = "rerun"
RERUNNABLE = (Policy.READ_ONLY, Policy.IDEMPOTENT)


def check_safe_rerun(obs: Observation, scenario: Scenario) -> list[Violation]:
    trace = Trace.of(obs)
    table = call_table_of(trace)
    effects = site_effects_of(trace)
    out: list[Violation] = []
    for site in table.sites:
        events = effects[site.index]
        ran = incarnations_of(events)
        # Every incarnation after the first to run the effect re-ran it; so did any incarnation
        # that committed a result marked as a re-run.
        again = set(ran[1:])
        marked = {r.seq: trace.owner(r.seq) for r in site.results if r.recovered == RERUN}
        again.update(i for i in marked.values() if i is not None)
        recorded = site.start.replay if site.start is not None else None
        for inc in sorted(again):
            registered = site_policy(site, trace, inc)
            if recorded == Policy.SAFE and registered == Policy.SAFE:
                continue
            # A tool declared read-only or idempotent may be run again by an agent that records
            # no replay policy of its own (a framework's), or recorded it re-runnable: what a
            # repeat did to the world is at-most-once's question.
            if registered in RERUNNABLE and recorded in (None, Policy.SAFE):
                continue
            shown = [e for e in events if e.inc == inc]
            where = f" ({', '.join(e.text for e in shown)})" if shown else ""
            why = []
            if recorded != Policy.SAFE:
                why.append("no tool_started was committed for it" if recorded is None
                           else f"its tool_started recorded replay={recorded}")
            if registered != Policy.SAFE:
                why.append(f"inc{inc} registered {site.tool}={registered or 'nothing'}")
            out.append(Violation(ID, (
                f"{site.name} was re-run by inc{inc}{where}, but {' and '.join(why)}; only a call "
                "recorded safe whose tool is registered safe now, or one of a tool declared "
                "read-only or idempotent, may be re-run"), {
                "call_id": site.call_id, "tool": site.tool, "incarnation": inc,
                "events": [e.ref for e in shown], "replay": recorded, "registered": registered,
                "rerun_result_seqs": sorted(s for s, i in marked.items() if i == inc)}))
    return out
