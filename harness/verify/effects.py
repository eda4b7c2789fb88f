"""Which effect probe events ran for which call site, in the global order of the trace."""

from __future__ import annotations

from crashmatrix.harness.verify.calls import CallSite, CallTable, call_table_of
from crashmatrix.harness.verify.trace import Located, Pos, Trace
from crashmatrix.scenarios.model import BoundaryKind


def _before(landed: Pos | None, at: Pos) -> bool:
    # A site whose commit no probe reported is taken to precede every effect: being lenient
    # here only widens which site an event is charged to, never hides an event.
    return landed is None or landed < at


def site_effects(trace: Trace, table: CallTable) -> dict[int, list[Located]]:
    """Effect events by site index. An event belongs to the latest site with its call id (and
    tool) whose assistant message was committed before it ran: reused ids stay apart.

    An agent may save a call together with its result once the tool has run (the OpenAI Agents
    SDK's session does): then the call it ran is the first such site the same incarnation
    committed after the effect, when no earlier site is still open (one whose result had already
    landed is answered: a reused id's next turn is not a re-run of it). Whether the agent recorded
    its intent first is intent-before-effect's question, not this one."""
    found: dict[int, list[Located]] = {s.index: [] for s in table.sites}
    # Each call id's sites (in table order) and where each assistant landed, found once: every
    # effect event looks them up.
    by_id: dict[str | None, list[CallSite]] = {}
    landed: dict[int, Pos | None] = {}
    for s in table.sites:
        by_id.setdefault(s.call_id, []).append(s)
        landed[s.index] = trace.commit_pos(s.assistant.seq)
    for ev in trace.effects():
        same_id = by_id.get(ev.call_id, [])
        same_tool = [s for s in same_id if s.tool == ev.label] or same_id
        earlier = [s for s in same_tool if _before(landed[s.index], ev.pos)]
        later = [s for s in same_tool if (p := landed[s.index]) is not None
                 and p[0] == ev.inc and ev.pos < p]
        if earlier and (not later or not _answered(trace, earlier[-1], ev)):
            found[earlier[-1].index].append(ev)
        elif later:
            found[later[0].index].append(ev)
        elif earlier:
            found[earlier[-1].index].append(ev)
    return found


def site_effects_of(trace: Trace) -> dict[int, list[Located]]:
    """`site_effects` of the judged transcript's call table, built once per judgement (four checks
    read it); shared, so not to be changed."""
    return trace.view(_effects)


def _effects(trace: Trace) -> dict[int, list[Located]]:
    return site_effects(trace, call_table_of(trace))


def _answered(trace: Trace, site: CallSite, ev: Located) -> bool:
    """Whether a result of `site` had landed (its commit placed by a probe) before `ev`."""
    return any((p := trace.commit_pos(r.seq)) is not None and p < ev.pos for r in site.results)


def befores(events: list[Located]) -> list[Located]:
    return [e for e in events if e.kind == BoundaryKind.EFFECT_BEFORE]


def afters(events: list[Located]) -> list[Located]:
    return [e for e in events if e.kind == BoundaryKind.EFFECT_AFTER]


def incarnations_of(events: list[Located]) -> list[int]:
    """The incarnations that ran any part of an effect, in order, each once."""
    seen: list[int] = []
    for e in events:
        if e.inc not in seen:
            seen.append(e.inc)
    return seen


def site_policy(site: CallSite, trace: Trace, inc: int) -> str | None:
    """The replay policy the tool had in incarnation `inc`, as the harness registered it."""
    record = trace.incarnation(inc)
    return None if record is None else record.policies.get(site.tool)
