"""What the terminal summary says was proved: failure groups, run facts, the facts block."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.run_record import LineCoverageRecord
from crashmatrix.harness.verify import CHECKS
from crashmatrix.reports import terminal
from crashmatrix.reports.facts import run_facts
from crashmatrix.reports.groups import UNKNOWN, GroupKey, distinct_failures, group_key, place_of
from tests.unit.test_reports_data import DECLARED, RECOVER, make, step

REGISTRY = [str(i) for i in CHECKS]
TWICE = [{"invariant": "at-most-once", "message": "append_note ran twice"}]
# A case of an agent whose adapter reads no store: one invariant not judged, one judged in part.
UNJUDGED = [{"invariant": "durable-commits", "reason": "it reads the commits the store holds"},
            {"invariant": "pairing", "reason": "stored calls and results", "partly": True}]
OUT = Path("/tmp/out")
FILES = [OUT / "results.jsonl", OUT / "run.json", OUT / "summary.md", OUT / "coverage" / "index.html"]


def failing(case: Case, violations: list[dict[str, object]] | None = None,
            verdict: Verdict = Verdict.FAIL) -> CaseResult:
    return make(case, verdict, violations=TWICE if violations is None else violations)


# --- groups -----------------------------------------------------------------------------------

def test_a_group_key_is_the_first_invariant_broken_and_what_it_is_about() -> None:
    # step(13) is effect.after:append_note; step(3) is commit.written, where torn applies.
    assert group_key(failing(Case("changelog", (step(13),)))) == GroupKey("at-most-once", "", "fail")
    # The verifier's order, not the alphabet's: a second writer is the cause of the double effect.
    both = [{"invariant": "at-most-once", "message": "twice",
             "evidence": {"path": "CHANGELOG.md", "tool": "bash"}},
            {"invariant": "one-writer", "message": "two pids", "evidence": {"pids": [7, 8]}}]
    assert group_key(failing(Case("changelog", (step(13),)), both)) == GroupKey("one-writer", "", "fail")
    assert group_key(failing(Case("changelog", (step(13),)), both[:1])).subject == "bash", "tool first"
    oracle = [{"invariant": "scenario-oracle", "message": "two lines", "evidence": {"path": "CHANGELOG.md"}}]
    assert group_key(failing(Case("changelog"), oracle)).subject == "CHANGELOG.md"
    unknown = [{"invariant": "a-check-of-my-own", "message": "?"}, *oracle]
    assert group_key(failing(Case("changelog"), unknown)).root == "scenario-oracle", "known ids first"
    gap = make(Case("changelog", (step(4),)), Verdict.SCENARIO_ERROR, scenario_error={"kind": "script-gap"})
    assert group_key(gap) == GroupKey("scenario-error", "script-gap", "scenario-error")
    assert place_of(Case("changelog", (step(13), step(2, RECOVER))).case_id) == (
        "effect.after+commit.before (kill+kill)")
    assert place_of(Case("changelog").case_id) == "with no crash"
    assert place_of("not a case id") == UNKNOWN


def test_distinct_failures_group_one_cause_and_split_another() -> None:
    same = [failing(Case("changelog", (step(13),))), failing(Case("other", (step(12),)))]
    other_invariant = failing(Case("changelog", (step(12),)),
                              [{"invariant": "pairing", "message": "unpaired"}])
    nondet = make(Case("changelog", (step(5),)), Verdict.NONDETERMINISTIC)
    held = make(Case("changelog", (step(4),)))
    groups = distinct_failures([held, nondet, other_invariant, *same])
    assert [len(g.cases) for g in groups] == [2, 1, 1], "largest first; the held case in none"
    assert groups[0].key.label == "at-most-once"
    assert groups[0].summary == "at-most-once; seen at effect.after (kill), effect.before (kill)"
    assert {g.key.verdict for g in groups} == {"fail", "nondeterministic"}
    assert distinct_failures(list(reversed([held, nondet, other_invariant, *same]))) == groups
    text = terminal.causes([held, nondet, other_invariant, *same])
    assert text.splitlines()[0] == "3 distinct failures (one root cause each; a case is in one):"
    assert "  2 cases: at-most-once; seen at effect.after (kill), effect.before (kill); e.g. " in text


# --- facts ------------------------------------------------------------------------------------

def test_an_invariant_not_judged_is_not_counted_as_checked() -> None:
    results = [make(Case("changelog", (step(13),)), not_applicable=UNJUDGED), make(Case("changelog"))]
    facts = run_facts(results, REGISTRY, DECLARED, 1, FILES)
    assert "durable-commits" not in facts.invariants
    assert list(facts.invariants) == [i for i in REGISTRY if i != "durable-commits"], "registry order"
    assert facts.partly == ("pairing",)
    assert facts.unjudged == ("durable-commits",)
    text = terminal.proved(facts)
    checked = text.split("faults")[0]
    assert "durable-commits" not in checked.split("(")[0]
    assert "pairing (in part)" in checked
    assert "1 not judged, listed above with why" in " ".join(checked.split())  # however it wraps
    whole = terminal.render(results, facts=facts)
    assert "durable-commits: it reads the commits the store holds" in whole, "listed with its reason"


def test_an_invariant_no_case_exercised_is_listed_apart_not_as_checked() -> None:
    some = [i for i in REGISTRY if i not in ("queued-input", "one-writer")]
    results = [make(Case("changelog", (step(13),)), exercised=some[:4]),
               make(Case("changelog"), exercised=some[4:])]
    facts = run_facts(results, REGISTRY, DECLARED, 1, FILES)
    assert list(facts.invariants) == some, "registry order, only what some case exercised"
    assert facts.never_exercised == ("one-writer", "queued-input")
    checked = " ".join(terminal.proved(facts).split("faults")[0].split())
    assert checked.startswith(f"checked {len(some)} invariants: ")
    assert "never exercised, so not shown to hold: one-writer, queued-input" in checked
    assert facts.to_json()["never_exercised"] == ["one-writer", "queued-input"]
    # Records written before `exercised` existed: nothing is hidden, and that is said.
    old = run_facts([make(Case("changelog"))], REGISTRY, DECLARED, 1, FILES)
    assert old.invariants == tuple(REGISTRY)
    assert not old.exercise_known
    assert "do not record which invariants each case exercised" in " ".join(terminal.proved(old).split())


def test_with_every_invariant_judged_the_block_names_the_whole_registry() -> None:
    facts = run_facts([make(Case("changelog", (step(13),)))], REGISTRY, DECLARED, 2, FILES, 112.4)
    assert facts.invariants == tuple(REGISTRY)
    text = terminal.proved(facts)
    assert all(i in text for i in REGISTRY)
    assert "kill · depth 2 · 1 case · 0 distinct failures · 1 min 52 s" in text
    assert max(len(line) for line in text.splitlines()) <= terminal.WIDTH


def test_no_results_prove_nothing() -> None:
    facts = run_facts([], REGISTRY, DECLARED, 1, FILES[:2])
    assert facts.invariants == ()
    assert facts.cases == 0
    assert terminal.proved(facts).startswith("checked    0 invariants: none")


def test_faults_depth_failures_and_coverage_come_from_the_results() -> None:
    torn = Case("changelog", (CrashStep(3, "commit.written", "x", "torn"),))
    results = [failing(Case("changelog", (step(13),))), failing(torn), make(Case("changelog")),
               make(Case("changelog", (step(2),)), branches=["nothing.no_open_run", "brand.new"])]
    facts = run_facts(results, REGISTRY, DECLARED, None, FILES)
    assert facts.faults == ("kill", "torn")
    assert facts.depth == 1, "the deepest case, when the caller does not say"
    assert facts.distinct_failures == 1, "one root cause, however the two crashes landed"
    c = facts.coverage
    assert (c.reached, c.declared) == (3, 4)
    assert c.unreached == ("close.budget_exhausted",)
    assert c.undeclared == ("brand.new",)
    line = " ".join(terminal.proved(facts).split("coverage")[1].split())  # as if unwrapped
    assert "recovery branches 3/4 reached; never reached: close.budget_exhausted" in line
    assert "reached but not declared: brand.new" in line


def test_the_json_keys_hold_the_same_facts() -> None:
    facts = run_facts([failing(Case("changelog", (step(13),)))], REGISTRY, DECLARED, 1, FILES, 3.21)
    data = facts.to_json()
    assert set(data) == {"invariants", "faults", "depth", "distinct_failures", "duration_s", "coverage",
                         "files", "line_coverage", "never_exercised"}
    assert data["line_coverage"] is None  # not measured
    assert data["invariants"] == REGISTRY
    assert data["duration_s"] == 3.2
    assert data["files"] == [str(p) for p in FILES]
    assert data["coverage"]["unreached"] == ["close.budget_exhausted"]
    assert run_facts([], REGISTRY, DECLARED, 1, []).to_json()["duration_s"] is None


def test_the_line_coverage_total_is_said_with_where_to_read_it() -> None:
    lines = LineCoverageRecord(61.5, "coverage/index.html", 12)
    facts = run_facts([failing(Case("changelog", (step(13),)))], REGISTRY, DECLARED, 1, FILES, lines=lines)
    line = " ".join(terminal.proved(facts).split("coverage", 1)[1].split("wrote")[0].split())
    assert "lines+branches of the agent run by recovery 61.5% (12 recoveries, coverage/index.html)" in line
    assert facts.to_json()["line_coverage"] == lines.to_json()
    unmeasured = run_facts([failing(Case("changelog", (step(13),)))], REGISTRY, DECLARED, 1, FILES)
    assert "lines+branches" not in terminal.proved(unmeasured)


def test_files_are_named_by_the_first_path_then_relative_to_its_folder() -> None:
    assert terminal.written(FILES) == ("/tmp/out/results.jsonl, run.json, summary.md, "
                                       "coverage/index.html")
    assert terminal.written([Path("out/results.jsonl"), Path("elsewhere/report.html")]) == (
        "out/results.jsonl, elsewhere/report.html"), "a file outside the folder keeps its path"


def test_durations_read_as_the_readme_writes_them() -> None:
    assert [terminal.duration(s) for s in (9.34, 112.4, 551, 3720)] == [
        "9.3 s", "1 min 52 s", "9 min 11 s", "1 h 2 min"]


def test_without_facts_the_summary_still_names_the_results_file() -> None:
    text = terminal.render([make(Case("changelog"))], "out/results.jsonl")
    assert "results: out/results.jsonl" in text
    assert "checked" not in text
