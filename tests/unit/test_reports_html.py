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
from crashmatrix.harness.verify import verify
from crashmatrix.reports import html
from crashmatrix.reports.groups import distinct_failures
from crashmatrix.reports.html_diff import DiffLine, diff_lines, render_file, repeated_records
from crashmatrix.reports.write import ReportFile, render_all
from tests.support.framework_case import refund_case, refund_scenario
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

def twice(tool: str, *also: str) -> list[dict[str, object]]:
    """An at-most-once violation about `tool`, and the invariants its consequence broke too."""
    return [{"invariant": "at-most-once", "message": f"{tool} took effect twice",
             "evidence": {"path": "outbox.jsonl", "tool": tool}},
            *({"invariant": i, "message": "and so"} for i in also)]


def test_one_root_cause_is_one_group_whatever_else_its_cases_broke_and_wherever_they_crashed() -> None:
    point, other = step(13), step(12)
    torn = CrashStep(point.n, point.kind, point.label, "torn")
    # The email sent twice also leaves two records where the scenario expects one (scenario-oracle):
    # its consequence, so the same group, which lists both.
    one_cause = [make(Case("changelog", (point,)), Verdict.FAIL,
                      violations=twice("send_email", "scenario-oracle")),
                 make(Case("changelog-fast", (other,)), Verdict.FAIL, violations=twice("send_email")),
                 make(Case("changelog", (torn,)), Verdict.FAIL,
                      violations=twice("send_email", "continuation"))]
    found = distinct_failures(one_cause)
    assert [len(g.cases) for g in found] == [3]
    assert (found[0].key.root, found[0].key.subject) == ("at-most-once", "send_email")
    assert found[0].invariants == ("at-most-once", "continuation", "scenario-oracle"), "the root first"
    assert found[0].places == ("effect.after (kill)", "effect.after (torn)", "effect.before (kill)")
    # Another tool that sends twice is another fix, so another group.
    refund = make(Case("changelog", (other,)), Verdict.FAIL, violations=twice("refund"))
    assert sorted(len(g.cases) for g in distinct_failures([*one_cause, refund])) == [1, 3]
    page = html.render([*one_cause, refund], DECLARED)
    assert page.count('<details class="group"') == 2
    assert ('data-cases="3" data-root="at-most-once" data-subject="send_email" '
            'data-invariants="at-most-once continuation scenario-oracle"') in page
    assert 'data-cases="1" data-root="at-most-once" data-subject="refund"' in page
    assert "2 distinct failure(s)" in page


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


def test_records_one_effect_repeated_are_marked_though_their_timestamps_differ() -> None:
    # The verifier's own violations, on an outbox whose two emails differ only in sent_at.
    obs = refund_case(emails_sent=2, records=2)
    violations = [v.to_json() for v in verify(obs, refund_scenario())]
    repeated = repeated_records(violations)
    assert repeated == {"outbox.jsonl": (1, 2)}
    after = obs.workspace_after["outbox.jsonl"]
    assert diff_lines(None, after) == [DiffLine("add", line, None, n, 0) for n, line in
                                       enumerate(after.splitlines(), 1)], "unequal lines: no plain dup"
    lines = diff_lines(None, after, repeated["outbox.jsonl"])
    assert [(d.dup, d.record) for d in lines] == [(2, True), (2, True)]
    shown = "".join(render_file("outbox.jsonl", None, after, None, repeated["outbox.jsonl"]))
    assert shown.count('<span class="d-add dup">') == 2
    assert "matched by the fields the scenario counts" in shown
    # One email, or too few: nothing repeated to mark.
    once = [v.to_json() for v in verify(refund_case(emails_sent=1, records=1), refund_scenario())]
    assert repeated_records(once) == {}
    none = [v.to_json() for v in verify(refund_case(emails_sent=1, records=0), refund_scenario())]
    assert any(v["invariant"] == "scenario-oracle" for v in none)
    assert repeated_records(none) == {}
