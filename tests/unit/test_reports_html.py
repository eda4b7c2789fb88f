"""The HTML report's failure view: evidence in the results, grouping by cause, the duplicate-line diff,
and byte-identical output."""

from __future__ import annotations

import dataclasses
import json
import random
from html import escape

from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.evidence import MAX_TEXT, SCRATCH, history, scrubbed
from crashmatrix.harness.records.observation import Observation, Request
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.run_record import LineCoverageRecord
from crashmatrix.reports import html
from crashmatrix.reports.groups import distinct_failures
from crashmatrix.reports.html_diff import diff_lines, render_file
from crashmatrix.reports.write import ReportFile, render_all
from tests.support.observations import (
    CHANGELOG,
    LINE,
    START,
    TASK,
    K,
    changelog_baseline,
    changelog_scenario,
    rerun_builder,
)
from tests.unit.test_reports_data import DECLARED, make, sample_results, step

AT_MOST_ONCE = [{"invariant": "at-most-once", "message": "append_note took effect twice"}]


def judged(obs: Observation) -> CaseResult:
    return evaluate(obs, changelog_scenario(), fsync=False, agent="durable-agent", scenario_dirs=[],
                    duration_ms=0.0)


def doubled() -> CaseResult:
    """Killed after the append took effect, and the append run again: the line is there twice."""
    return judged(rerun_builder(kill_at=K.EFFECT_AFTER).build())


# --- evidence in the results ------------------------------------------------------------------

def test_a_pass_carries_no_evidence_and_a_failure_does() -> None:
    passed = judged(changelog_baseline())
    assert passed.verdict is Verdict.PASS
    assert passed.evidence is None
    assert "evidence" in passed.to_json(), "the field is there, as null"
    failed = doubled()
    assert failed.verdict is Verdict.FAIL
    ev = failed.evidence
    assert ev is not None
    assert [i["command"] for i in ev["incarnations"]] == ["run", "recover", "recover"]
    assert ev["incarnations"][0]["crashed_at"] == len(ev["incarnations"][0]["events"])
    reruns = [x for i in ev["incarnations"] for x in i["events"] if x.get("rerun")]
    assert reruns, "the recovery's effects are marked as re-runs"
    (changelog,) = [f for f in ev["files"] if f["path"] == CHANGELOG]
    assert changelog["before"] == START[CHANGELOG]
    assert changelog["after"].count(LINE) == 2
    assert ev["requests"], "the provider requests are there"
    assert all(q["incarnation"] in (1, 2) for q in ev["requests"])
    # The store's commits are attributed to the incarnation that wrote each.
    by = {c["seq"]: c["incarnation"] for c in ev["store"]["commits"]}
    first_recovery = ev["incarnations"][1]["commits_before"]
    assert {by[s] for s in by if s <= first_recovery} == {1}
    assert {by[s] for s in by if s > first_recovery} == {2}
    assert CaseResult.from_json(json.loads(json.dumps(failed.to_json()))) == failed


def test_the_history_each_request_sent_is_whole_again() -> None:
    obs = rerun_builder(kill_at=K.EFFECT_AFTER).build()
    ev = judged(obs).evidence
    assert ev is not None
    assert len(ev["requests"]) == len(obs.requests) >= 3
    assert any("shares" in q for q in ev["requests"]), "a request names what it shares with the last"
    for i, request in enumerate(obs.requests):
        # As sent, but for what every record leaves out (durations, scratch paths).
        assert history(ev["requests"], i) == scrubbed(request.messages)


def test_evidence_holds_no_scratch_path_nor_timing_and_clips_long_messages() -> None:
    scratch = "/dev/shm/crashmatrix-4242-ab12cd_9/changelog_12/ws"
    obs = rerun_builder(kill_at=K.EFFECT_AFTER).build()
    last = obs.requests[-1]
    messages = [*last.messages, {"role": "tool", "tool_call_id": "call_9",
                                 "content": f"ERROR: {scratch}/CHANGELOG.md: denied; 1 passed in 0.03s"},
                {"role": "user", "content": "y" * (3 * MAX_TEXT)}]
    obs.requests[-1] = Request(last.index, messages, last.status, reply=last.reply)
    obs.incarnations[1].events[0] = dataclasses.replace(
        obs.incarnations[1].events[0], detail={"call_id": f"{scratch}/x"})
    text = json.dumps(judged(obs).evidence, ensure_ascii=False)
    assert "/dev/shm" not in text
    assert "crashmatrix-4242" not in text
    assert f"{SCRATCH}/changelog_12/ws/CHANGELOG.md" in text
    assert "0.03s" not in text, "a duration differs from run to run; the record must not"
    assert "y" * (MAX_TEXT + 1) not in text
    assert "y" * MAX_TEXT in text


# --- grouping ---------------------------------------------------------------------------------

def test_two_cases_of_one_cause_are_one_group_and_another_fault_is_another() -> None:
    point = step(13)
    torn = CrashStep(point.n, point.kind, point.label, "torn")
    same = [make(Case("changelog", (point,)), Verdict.FAIL, violations=AT_MOST_ONCE),
            make(Case("changelog-fast", (point,)), Verdict.FAIL, violations=AT_MOST_ONCE)]
    found = distinct_failures(same)
    assert [len(g.cases) for g in found] == [2]
    assert (found[0].key.invariants, found[0].key.boundary, found[0].key.fault) == (
        ("at-most-once",), "effect.after", "kill")
    other = make(Case("changelog", (torn,)), Verdict.FAIL, violations=AT_MOST_ONCE)
    assert sorted(len(g.cases) for g in distinct_failures([*same, other])) == [1, 2]
    page = html.render([*same, other], DECLARED)
    assert page.count('<details class="group"') == 2
    for count, fault in ((2, "kill"), (1, "torn")):
        assert (f'data-cases="{count}" data-invariant="at-most-once" data-boundary="effect.after" '
                f'data-fault="{fault}"') in page


def test_the_index_counts_each_scenario() -> None:
    page = html.render(sample_results(), DECLARED)
    assert ('data-scenario="changelog" data-cases="22" data-held="20" data-violated="2" data-other="0" '
            'data-distinct="2"') in page
    assert ('data-scenario="tool-stop" data-cases="5" data-held="2" data-violated="0" data-other="3" '
            'data-distinct="3"') in page
    assert '<a href="#s-changelog">' in page
    assert '<section class="scenario" id="s-changelog"' in page
    assert '<p id="coverage-summary" class="s-unreached">Recovery branches: 3 of 4 declared reached' in page


# --- the diff ---------------------------------------------------------------------------------

def test_a_line_an_effect_doubled_is_marked_dup() -> None:
    before, after = "# Changelog\n\n", f"# Changelog\n\n{LINE}\n{LINE}\n"
    lines = diff_lines(before, after)
    assert [(d.op, d.text, d.dup) for d in lines] == [
        ("eq", "# Changelog", 0), ("eq", "", 0), ("add", LINE, 2), ("add", LINE, 2)]
    shown = "".join(render_file(CHANGELOG, before, after))
    assert shown.count('<span class="d-add dup">') == 2
    assert "⚠ ×2" in shown
    # Already there once before, twice after: both copies are the double.
    again = diff_lines(f"a\n{LINE}\n", f"a\n{LINE}\n{LINE}\n")
    assert [(d.op, d.dup) for d in again] == [("eq", 0), ("eq", 2), ("add", 2)]


def test_a_single_append_or_repeated_blank_lines_are_not_marked() -> None:
    shown = "".join(render_file(CHANGELOG, "# Changelog\n\n", f"# Changelog\n\n{LINE}\n\n"))
    assert "dup" not in shown
    assert '<span class="d-add"><span class="ln">   3</span> + 修复登录超时</span>' in shown
    assert [d.dup for d in diff_lines(f"{LINE}\n{LINE}\n", f"{LINE}\n{LINE}\nmore\n")] == [0, 0, 0], \
        "a line that was there twice already is no new double"


def test_a_failing_case_shows_its_doubled_line_requests_and_store() -> None:
    page = html.render([doubled()], DECLARED)
    assert page.count(f'<span class="d-add dup"><span class="ln">   2</span> + {LINE} ') == 1
    assert '<li class="k-effect dup">' in page, "the second effect is marked on its lane"
    assert f'<li class="msg m-user"><span class="role">user</span><pre>{escape(TASK)}</pre></li>' in page
    assert '<tr class="left"><td colspan="4">↑ as incarnation 1 left it:' in page
    assert 'title="SIGKILL here"' in page


# --- determinism ------------------------------------------------------------------------------

def test_the_page_is_the_same_bytes_whatever_order_the_results_come_in() -> None:
    results = [*sample_results(), dataclasses.replace(doubled(), scenario="changelog")]
    first = render_all(results, DECLARED)[ReportFile.HTML]
    assert render_all(results, DECLARED)[ReportFile.HTML] == first
    shuffled = list(results)
    random.Random(7).shuffle(shuffled)
    assert shuffled != results
    assert render_all(shuffled, DECLARED)[ReportFile.HTML] == first
    assert html.render(results, DECLARED) == html.render(results, DECLARED)


def test_line_coverage_from_run_json_is_shown_with_a_relative_link() -> None:
    lines = LineCoverageRecord(percent=64.7, html="coverage/index.html", recoveries=90)
    page = html.render(sample_results(), DECLARED, None, lines)
    assert ('<p id="line-coverage">Line and branch coverage of the agent in recovery incarnations: 64.7% '
            '(<a href="coverage/index.html">coverage/index.html</a>), from 90 recoveries.</p>') in page
    assert 'id="line-coverage"' not in html.render(sample_results(), DECLARED)
    elsewhere = html.render(sample_results(), DECLARED, None, LineCoverageRecord(50.0, "/abs/index.html", 1))
    assert 'href="/abs' not in elsewhere
