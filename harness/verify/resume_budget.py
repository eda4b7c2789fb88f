"""resume-budget: resumes count up by one, stay within the budget, and a budget close is due and final."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.transcript import Run
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.off_by import off_by
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import BoundaryKind, Outcome, Scenario

ID = InvariantId.RESUME_BUDGET
BUDGET_WORD = "budget"  # a run closed for budget says so in its reason (see agent/recovery.py)


def check_resume_budget(obs: Observation, scenario: Scenario) -> list[Violation]:
    t = obs.transcript
    runs = {r.run_id: r for r in t.runs}
    out: list[Violation] = []
    for run in t.runs:
        if run.resumed_from is None:
            continue
        origin = runs.get(run.resumed_from)
        expected = (origin.resume_attempt if origin is not None else 0) + 1
        if origin is not None and run.resume_attempt != expected:
            out.append(Violation(ID, (
                f"run {run.run_id} (commit {run.seq}) resumes {origin.run_id} as attempt "
                f"{run.resume_attempt}, but {origin.run_id} was attempt {origin.resume_attempt}; "
                "resume_attempt must go up by one along a chain"), {
                "run": run.run_id, "seq": run.seq, "resume_attempt": run.resume_attempt,
                "expected": expected}))
        if run.resume_attempt > obs.resume_budget:
            out.append(Violation(ID, (
                f"run {run.run_id} (commit {run.seq}) is resume attempt {run.resume_attempt}, past "
                f"the resume budget of {obs.resume_budget} "
                f"({off_by(run.resume_attempt, obs.resume_budget)}: recovery had to close the "
                "chain instead)"), {
                "run": run.run_id, "seq": run.seq, "resume_attempt": run.resume_attempt,
                "budget": obs.resume_budget}))
    trace = Trace.of(obs)
    for run in t.runs:
        if run.outcome == Outcome.ABORTED and BUDGET_WORD in (run.reason or "").lower():
            out += _budget_close(obs, trace, run)
    return out


def _budget_close(obs: Observation, trace: Trace, run: Run) -> list[Violation]:
    t = obs.transcript
    out: list[Violation] = []
    if run.resume_attempt < obs.resume_budget:
        # Recovery closes a chain when the next resume would be attempt budget + 1, so the run it
        # closes is attempt `budget`; one before it still had resumes left.
        out.append(Violation(ID, (
            f"run {run.run_id} was closed for its resume budget at commit {run.finished_seq} as "
            f"resume attempt {run.resume_attempt}; the budget of {obs.resume_budget} allows "
            f"{obs.resume_budget} resume(s) before a close: it was closed "
            f"{off_by(run.resume_attempt, obs.resume_budget)}"), {
            "run": run.run_id, "finished_seq": run.finished_seq,
            "resume_attempt": run.resume_attempt, "budget": obs.resume_budget}))
    if not any(str(n.data.get("run_id")) == run.run_id for n in t.of_kind("notice")):
        out.append(Violation(ID, (
            f"run {run.run_id} was closed for its resume budget at commit {run.finished_seq} "
            "without a visible notice record"), {"run": run.run_id, "finished_seq": run.finished_seq}))
    if run.finished_seq is None:  # an outcome always comes with its commit
        return out
    closed = trace.commit_pos(run.finished_seq)
    closer = trace.owner(run.finished_seq)
    # A later run (from a new input) may talk to the provider again; the closed chain may not.
    later = [trace.commit_pos(r.seq) for r in t.runs if r.seq > run.finished_seq]
    until = min((p for p in later if p is not None), default=None)
    asked = [e for e in trace.of_kind(BoundaryKind.PROVIDER_BEFORE)
             if closed is not None and e.pos > closed and (until is None or e.pos < until)]
    refs = [e.ref for e in asked]
    extra: list[int] = []
    if not later and closer is not None:
        extra = [r.index for inc in obs.incarnations if inc.index > closer
                 for r in trace.requests_of(inc.index)]
    if asked or extra:
        shown = ", ".join(e.text for e in asked) or ", ".join(f"request #{i}" for i in extra)
        out.append(Violation(ID, (
            f"run {run.run_id} was closed for its resume budget at commit {run.finished_seq}, yet "
            f"the provider was asked again afterwards ({shown}); a budget close makes no further "
            "requests"), {"run": run.run_id, "finished_seq": run.finished_seq, "events": refs,
                          "requests": extra}))
    return out
