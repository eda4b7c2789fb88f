"""What a failing case's agent printed, in the reports: repro's timeline, summary.md and report.html."""

from __future__ import annotations

import re
from html import escape

from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.observation import RawOutput
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.reports import html, markdown, timeline
from crashmatrix.reports.agent_output import tails, telling
from tests.support.observations import K, changelog_baseline, changelog_scenario, rerun_builder
from tests.unit.test_reports_data import DECLARED, make, step

ERROR = "ModuleNotFoundError: No module named 'nosuchmod'"


def failing(case: Case, *tails_: tuple[int, str], exit_codes: list[int | None] | None = None) -> CaseResult:
    extra: dict[str, object] = {"agent_output": [{"incarnation": i, "tail": t} for i, t in tails_]}
    if exit_codes is not None:
        extra["exit_codes"] = exit_codes
    return make(case, Verdict.FAIL, violations=[{"invariant": "liveness", "message": "never finished"}],
                **extra)


# --- which tail -------------------------------------------------------------------------------

def test_the_telling_tail_is_the_first_incarnation_that_stopped_on_its_own_with_an_error() -> None:
    case = Case("changelog", (step(3),))  # incarnation 1 killed at 3, 2 recovers, 3 settles
    r = failing(case, (1, "starting"), (2, ERROR), (3, "nothing to recover"), exit_codes=[None, 1, 0])
    assert telling(r) == tails(r)[1]
    calm = failing(case, (1, "starting"), (3, "nothing to recover"), exit_codes=[None, 0, 0])
    assert telling(calm) == tails(calm)[-1], "else the last that printed anything"
    assert telling(make(case)) is None


def test_malformed_entries_of_a_hand_edited_file_are_skipped() -> None:
    r = make(Case("changelog"), Verdict.FAIL, agent_output=[
        "text", {"incarnation": "1", "tail": "x"}, {"incarnation": True, "tail": "x"},
        {"incarnation": 2, "tail": ""}, {"incarnation": 3, "tail": "kept"}])
    assert [(t.incarnation, t.text) for t in tails(r)] == [(3, "kept")]


# --- repro's timeline -------------------------------------------------------------------------

def test_the_timeline_shows_each_incarnations_last_lines_for_a_failing_case_only() -> None:
    obs = rerun_builder(kill_at=K.EFFECT_AFTER).build()
    obs.incarnations[0].output = RawOutput(f"Traceback (most recent call last):\n{ERROR}\n".encode())
    result = evaluate(obs, changelog_scenario(), fsync=False, agent="durable-agent", scenario_dirs=[],
                      duration_ms=0.0, env={})
    assert result.verdict is Verdict.FAIL
    lines = timeline.render(obs, result)
    head = lines.index("-- agent output (inc1, last lines; stdout and stderr)")
    assert lines[head + 1:head + 3] == ["   | Traceback (most recent call last):", f"   | {ERROR}"]
    assert head < lines.index("-- store")

    passing = changelog_baseline()
    for inc in passing.incarnations:
        inc.output = RawOutput(b"durable-agent: finished\n")
    held = evaluate(passing, changelog_scenario(), fsync=False, agent="durable-agent", scenario_dirs=[],
                    duration_ms=0.0, env={})
    assert held.verdict is Verdict.PASS
    assert not any(line.startswith("-- agent output") for line in timeline.render(passing, held))


# --- summary.md -------------------------------------------------------------------------------

def test_the_summary_shows_one_tail_per_distinct_failure_fenced_inside_its_item() -> None:
    many = [f"line {i} ```" for i in range(1, 31)]  # backticks: the fence must be longer
    # Both killed at a commit.before: one cause, one group; the first by case id speaks for it.
    first = failing(Case("changelog", (step(8),)), (1, "\n".join(many)))
    second = failing(Case("changelog", (step(10),)), (1, "another case, same cause"))
    silent = make(Case("changelog", (step(5),)), Verdict.ERROR, agent_output=[])
    text = markdown.render([first, second, silent], DECLARED)
    assert text.count("agent output (inc") == 1, "one per distinct failure, not one per case"
    block = text.split("  - agent output (inc1, last lines):\n", 1)[1].split("\n")
    assert block[0] == "    ````text"
    end = block.index("    ````")
    shown = block[1:end]
    assert shown[0] == f"    [{30 - markdown.MAX_OUTPUT_LINES} lines before]"
    assert shown[1:] == [f"    {line}" for line in many[-markdown.MAX_OUTPUT_LINES:]]
    assert "another case, same cause" not in text
    # The block sits in the first case's item, before the next case's line.
    assert text.index(first.case) < text.index("````text") < text.index(f"`{second.case}`")


def test_a_summary_without_any_tail_has_no_block() -> None:
    text = markdown.render([failing(Case("changelog", (step(3),)))], DECLARED)
    assert "agent output" not in text
    assert "```" not in text


# --- report.html ------------------------------------------------------------------------------

def test_the_page_folds_each_tail_into_the_case_escaped() -> None:
    hostile = "<script>alert(1)</script></pre><img src=x onerror=alert(2)>"
    r = failing(Case("changelog", (step(3),)), (1, "first words"), (2, hostile))
    page = html.render([r], DECLARED)
    folded = re.search(r'<details class="output"><summary>(.*?)</summary>(.*?)</details>', page, re.S)
    assert folded is not None
    assert "inc1, inc2" in folded.group(1)
    assert "<pre>first words</pre>" in folded.group(2)
    assert f"<pre>{escape(hostile, quote=True)}</pre>" in folded.group(2)
    assert "<img" not in page
    assert page.count("<script") == 1, "our script only"
    assert '<details class="output"' not in html.render([make(Case("changelog", (step(3),)))], DECLARED)
