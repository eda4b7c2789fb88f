"""Sample case results for the report tests (also used by the browser test), and branch coverage."""

from __future__ import annotations

from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.reports.coverage import BranchCoverage, BranchStatus, branch_coverage, unreached

# The first incarnation of the changelog scenario, as the probes report it.
TRACE = ["recovery.branch:nothing.no_open_run", "commit.before:run_started.prompt,message.user",
         "commit.written:run_started.prompt,message.user", "commit.after:run_started.prompt,message.user",
         "inbox.poll:inbox", "provider.before:chat", "provider.after:reply",
         "commit.before:message.assistant", "commit.after:message.assistant",
         "commit.before:tool_started.append_note", "commit.after:tool_started.append_note",
         "effect.before:append_note", "effect.after:append_note",
         "commit.before:message.tool.append_note", "commit.after:message.tool.append_note",
         "commit.before:message.assistant,run_finished.completed",
         "commit.after:message.assistant,run_finished.completed"]
RECOVER = ["recovery.branch:call.unknown_recorded_never", "commit.before:repair", "commit.after:repair",
           "recovery.branch:continue.after_tool_result", "provider.before:chat", "provider.after:reply",
           "commit.after:message.assistant,run_finished.completed"]
SETTLE = ["recovery.branch:nothing.no_open_run"]
DECLARED = ("nothing.no_open_run", "call.unknown_recorded_never", "continue.after_tool_result",
            "close.budget_exhausted")
FAILING = "changelog/13:effect.after:append_note/kill"
# A scenario error's cause as harness/verify/scenario_error.py records it: a script gap.
GAP_HEADLINE = ("request #1 (inc2, recover) got HTTP 400 crashmatrix_script_gap: no rule of the "
                "script matches this request; add a rule whose `when` holds for it")
GAP = {"kind": "script-gap", "headline": GAP_HEADLINE,
       "message": f"{GAP_HEADLINE}; its last messages: tool: call_0: ERROR: <unknown> & more",
       "request": 1, "incarnation": 2, "messages": 3, "fix": "add a rule",
       "last_messages": [{"role": "assistant", "text": "calls append_note(path=CHANGELOG.md)"},
                         {"role": "tool", "text": "call_0: ERROR: <unknown> & more"}]}
REPRO = f"crashmatrix repro {FAILING}"


def make(case: Case, verdict: Verdict = Verdict.PASS, **extra: object) -> CaseResult:
    """A result shaped like the harness's: one trace per incarnation, the crash points marked."""
    trace = [TRACE[: case.schedule[0].n] if case.schedule else TRACE]
    crashed: list[int | None] = [case.schedule[0].n if case.schedule else None]
    for step in case.schedule[1:]:
        trace.append(RECOVER[: step.n])
        crashed.append(step.n)
    if case.schedule:
        trace.append(RECOVER)
        crashed.append(None)
    trace.append(SETTLE)
    crashed.append(None)
    branches = sorted({e.split(":", 1)[1] for inc in trace for e in inc if e.startswith("recovery.branch:")})
    fields: dict[str, object] = {
        "branches": branches, "trace": trace, "crashed_at": crashed,
        "exit_codes": [None if c else 0 for c in crashed], "requests": 2, "commits": 6,
        "duration_ms": 1234.5, "incarnation_ms": [400.0] * len(trace),
        "repro": f"crashmatrix repro {case.case_id}"}
    fields.update(extra)
    return CaseResult(case.case_id, case.scenario, case.depth, verdict, **fields)  # type: ignore[arg-type]


def step(n: int, trace: list[str] = TRACE) -> CrashStep:
    kind, label = trace[n - 1].split(":", 1)
    return CrashStep(n, kind, label)


def sample_results() -> list[CaseResult]:
    """Two scenarios: every single crash, a few depth-2 cases, and one of each bad verdict."""
    out = [make(Case("changelog"))]
    for n in range(1, len(TRACE) + 1):
        case = Case("changelog", (step(n),))
        if case.case_id == FAILING:
            out.append(make(case, Verdict.FAIL, violations=[
                {"invariant": "at-most-once", "message": "append_note ran twice: 2 lines in CHANGELOG.md",
                 "evidence": {"lines": ["- note <b>&", "- note <b>&"]}},
                {"invariant": "scenario-oracle", "message": "CHANGELOG.md differs", "evidence": None}]))
        else:
            out.append(make(case))
    for n in (1, 2, 3):
        out.append(make(Case("changelog", (step(13), step(n, RECOVER)))))
    out.append(make(Case("changelog", (step(13), step(4, RECOVER))), Verdict.FAIL,
                    violations=[{"invariant": "pairing", "message": "call c1 has two results",
                                 "evidence": {"call": "c1"}}]))
    out += [make(Case("tool-stop")),
            make(Case("tool-stop", (step(5),)), Verdict.NONDETERMINISTIC,
                 note="crash point 05 was provider.before:chat, recorded inbox.poll:inbox"),
            make(Case("tool-stop", (step(6),)), Verdict.ERROR, note="harness: agent never started"),
            make(Case("tool-stop", (step(7),))),
            make(Case("tool-stop", (step(8),)), Verdict.SCENARIO_ERROR, note=GAP["message"],
                 scenario_error=GAP)]
    return out


def test_sample_has_every_verdict_and_a_deeper_level() -> None:
    results = sample_results()
    assert {r.verdict for r in results} == set(Verdict)
    assert {r.depth for r in results} == {0, 1, 2}
    assert len({r.case for r in results}) == len(results)


def test_coverage_lists_every_declared_branch_with_counts_and_an_example() -> None:
    results = sample_results()
    rows = branch_coverage(results, DECLARED)
    assert [c.branch for c in rows] == list(DECLARED)
    by = {c.branch: c for c in rows}
    assert by["nothing.no_open_run"].cases == len(results)  # every settle run reaches it
    recovered = [r for r in results if r.depth > 0]
    assert by["call.unknown_recorded_never"].cases == len(recovered)
    first_crash = "changelog/01:recovery.branch:nothing.no_open_run/kill"
    assert by["call.unknown_recorded_never"].example_case == first_crash
    assert by["close.budget_exhausted"] == BranchCoverage("close.budget_exhausted", 0, None)
    assert by["close.budget_exhausted"].status is BranchStatus.UNREACHED
    assert unreached(results, DECLARED) == ["close.budget_exhausted"]


def test_reached_but_undeclared_branches_are_listed_and_flagged() -> None:
    rows = branch_coverage(sample_results(), ["nothing.no_open_run"])
    assert [(c.branch, c.status) for c in rows] == [
        ("nothing.no_open_run", BranchStatus.REACHED),
        ("call.unknown_recorded_never", BranchStatus.UNDECLARED),
        ("continue.after_tool_result", BranchStatus.UNDECLARED)]


def test_coverage_does_not_depend_on_result_order() -> None:
    results = sample_results()
    assert branch_coverage(results, DECLARED) == branch_coverage(results[::-1], DECLARED)


def test_a_branch_reached_twice_in_one_case_counts_once() -> None:
    r = make(Case("changelog"), branches=["nothing.no_open_run", "nothing.no_open_run"])
    assert branch_coverage([r], DECLARED)[0].cases == 1
