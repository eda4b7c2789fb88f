"""finished-stays-finished: a completed, cancelled or stopped run is never resumed or acted on."""

from __future__ import annotations

from crashmatrix.harness.records.observation import IncarnationRecord, Observation
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import BoundaryKind, Outcome, Scenario

ID = InvariantId.FINISHED_STAYS_FINISHED
FINAL = frozenset({Outcome.COMPLETED.value, Outcome.CANCELLED.value, Outcome.STOPPED.value})
RUN_COMMAND = "run"  # a `run` brings its task as new input; only `recover` must find nothing


def check_finished_stays_finished(obs: Observation, scenario: Scenario) -> list[Violation]:
    t = obs.transcript
    runs = {r.run_id: r for r in t.runs}
    out: list[Violation] = []
    for run in t.runs:
        origin = runs.get(run.resumed_from) if run.resumed_from else None
        if origin is not None and origin.outcome in FINAL:
            out.append(Violation(ID, (
                f"run {run.run_id} (commit {run.seq}) resumes run {origin.run_id}, which finished "
                f"{origin.outcome} at commit {origin.finished_seq}; a finished run is never resumed"), {
                "run": run.run_id, "seq": run.seq, "resumed_from": origin.run_id,
                "outcome": origin.outcome, "finished_seq": origin.finished_seq}))
    trace = Trace.of(obs)
    for inc in obs.incarnations:
        if inc.command != RUN_COMMAND:
            out += _idle_incarnation(obs, trace, inc)
    return out


def _idle_incarnation(obs: Observation, trace: Trace, inc: IncarnationRecord) -> list[Violation]:
    """An incarnation that starts on a finished session with no new input must do nothing."""
    t = obs.transcript
    before = inc.commits_before
    started = [r for r in t.runs if r.seq <= before]
    if not started:
        return []
    last = max(started, key=lambda r: r.seq)
    if last.outcome not in FINAL or last.finished_seq is None or last.finished_seq > before:
        return []
    consumed = {str(r.data.get("input_id")) for r in t.of_kind("input_consumed") if r.seq <= before}
    if any(d.kind == "input" and d.incarnation <= inc.index and d.item_id not in consumed
           for d in obs.deliveries):
        return []
    requests = trace.requests_of(inc.index)
    asked = trace.of_kind(BoundaryKind.PROVIDER_BEFORE, inc.index)
    effects = [e for e in trace.effects() if e.inc == inc.index]
    if not (requests or asked or effects):
        return []
    done = []
    if requests or asked:
        done.append(f"made {max(len(requests), len(asked))} provider request(s)")
    if effects:
        done.append(f"ran effects ({', '.join(e.text for e in effects)})")
    return [Violation(ID, (
        f"inc{inc.index} started with the session's last run {last.run_id} already {last.outcome} "
        f"(commit {last.finished_seq}) and no new input, yet it {' and '.join(done)}; a finished "
        "session must stay finished"), {
        "incarnation": inc.index, "run": last.run_id, "outcome": last.outcome,
        "finished_seq": last.finished_seq, "requests": [r.index for r in requests],
        "events": [e.ref for e in [*asked, *effects]]})]
