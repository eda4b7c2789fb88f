"""no-silent-success: a result that is not an error is backed by an effect that really completed."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.transcript import Message
from crashmatrix.harness.records.violation import InvariantId, Violation, short
from crashmatrix.harness.verify.calls import CallSite, call_table_of
from crashmatrix.harness.verify.effects import afters, site_effects_of
from crashmatrix.harness.verify.trace import Located, Trace
from crashmatrix.scenarios.model import Scenario

ID = InvariantId.NO_SILENT_SUCCESS
RERUN = "rerun"
UNKNOWN = "unknown"


def check_no_silent_success(obs: Observation, scenario: Scenario) -> list[Violation]:
    trace = Trace.of(obs)
    table = call_table_of(trace)
    effects = site_effects_of(trace)
    marker = scenario.provider.unknown_marker
    out: list[Violation] = []
    for site in table.sites:
        for result in site.results:
            evidence = {"call_id": site.call_id, "tool": site.tool, "result": result.msg_id,
                        "result_seq": result.seq, "recovered": result.recovered,
                        "effects": [e.ref for e in effects[site.index]]}
            if result.recovered == UNKNOWN:
                out += _unknown(site, result, marker, evidence)
            if result.is_error or not obs.probes:
                continue  # without probes no effect.after can back it: not judged (checks.py)
            owner = trace.owner(result.seq)
            if _backed(trace, result, owner, effects[site.index]):
                continue
            committer = f"inc{owner}" if owner is not None else "an unknown incarnation"
            evidence["incarnation"] = owner
            how = "a recovery re-run of it" if result.recovered == RERUN else "its effect"
            out.append(Violation(ID, (
                f"the result of {site.name} at commit {result.seq} reports success "
                f"({short(result.content, 50)!r}), but {committer}, which committed it, never "
                f"completed {how} (no effect.after:{site.tool} for {site.call_id}); a result for a "
                "call that was not run must be an error saying the outcome is unknown"), evidence))
    return out


def _unknown(site: CallSite, result: Message, marker: str,
             evidence: dict[str, object]) -> list[Violation]:
    """A synthetic result must tell the model the truth: an error, with the outcome unknown."""
    wrong = []
    if not result.is_error:
        wrong.append("is not marked as an error")
    if marker not in (result.content or ""):
        wrong.append(f"does not say {marker!r}")
    if not wrong:
        return []
    return [Violation(ID, (
        f"the recovered-unknown result of {site.name} at commit {result.seq} "
        f"{' and '.join(wrong)} ({short(result.content, 50)!r}); an unknown outcome must never "
        "read as success"), dict(evidence))]


def _backed(trace: Trace, result: Message, owner: int | None, events: list[Located]) -> bool:
    """An effect.after of this call site, in the committing incarnation, before the commit."""
    if owner is None:
        return False
    landed = trace.commit_pos(result.seq)
    for e in afters(events):
        if e.inc != owner or (landed is not None and e.pos > landed):
            continue
        # A re-run result must be backed by the re-run itself, not by the original attempt.
        if result.recovered == RERUN and not e.recovery:
            continue
        return True
    return False
