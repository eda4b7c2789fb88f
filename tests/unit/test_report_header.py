"""Every report opens with what it rests on (issue 34, item 4): the agent, where its adapter comes
from and the framework it hosts, the invariants judged and not (with why), faults, depth, scenarios."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.run_record import RunOptions, RunRecord
from crashmatrix.reports import html, junit, markdown
from crashmatrix.reports.header import header

REGISTRY = ["pairing", "one-writer", "at-most-once"]


def _results() -> list[CaseResult]:
    out = []
    for case, depth in (("s/none", 0), ("s/01:commit.after:m/kill", 1), ("s/02:commit.after:m/torn", 1)):
        out.append(CaseResult(case=case, scenario="s", depth=depth, verdict=Verdict.PASS, agent="langgraph",
                              repro=f"crashmatrix repro {case}", exercised=["pairing", "at-most-once"],
                              not_applicable=[{"invariant": "one-writer",
                                               "reason": "no 'concurrent' capability"}]))
    return out


def test_every_renderer_opens_with_the_agent_and_what_was_judged(tmp_path: Path) -> None:
    record = RunRecord(declared_branches=(), options=RunOptions(agent="langgraph", depth=1),
                       agent_origin="mypkg.adapter.LangGraphAdapter (mypkg 1.0)",
                       agent_framework="LangGraph 1.2.3")
    results = _results()
    h = header(results, REGISTRY, record)
    assert h.judged == ("pairing", "at-most-once")
    assert h.not_judged == {"one-writer": "no 'concurrent' capability"}
    assert h.faults == ("kill", "torn")
    summary = markdown.render(results, [], header=h)
    head = summary.split("cases:", 1)[0]  # before the counts
    assert "- **agent**: langgraph (LangGraph 1.2.3)" in head
    assert "- **adapter**: mypkg.adapter.LangGraphAdapter (mypkg 1.0)" in head
    assert "- **judged**: 2 invariants: pairing, at-most-once" in head
    assert "- **not judged**: one-writer (no 'concurrent' capability)" in head
    assert "- **faults**: kill, torn" in head
    assert "- **depth**: 1" in head
    assert "- **scenarios**: s" in head
    page = html.render(results, [], header=h)
    top = page.split('id="totals"', 1)[0]
    for text in ("langgraph (LangGraph 1.2.3)", "2 invariants: pairing, at-most-once",
                 "one-writer (no &#x27;concurrent&#x27; capability)", "kill, torn"):
        assert text in top, text
    xml = junit.render(results, (), h)
    assert '<property name="crashmatrix:agent" value="langgraph (LangGraph 1.2.3)" />' in xml
    assert '"crashmatrix:not-judged" value="one-writer (no \'concurrent\' capability)" />' in xml
    assert '<property name="crashmatrix:depth" value="1" />' in xml


def test_without_a_run_json_the_agent_is_the_one_the_results_name() -> None:
    h = header(_results(), REGISTRY, None)
    assert h.agent == "langgraph"
    assert h.origin is None
    assert ("adapter", "") not in h.fields()
    assert [label for label, _ in h.fields()] == ["agent", "judged", "not judged", "faults", "depth",
                                                  "scenarios"]


def test_an_empty_branch_table_says_why_it_is_empty() -> None:
    """Issue 34: "0 of 0 recovery branches" and an empty table read as a result; they are not."""
    results = _results()
    summary = markdown.render(results, [])
    assert "No recovery branch to report: the agent's adapter declares none" in summary
    assert "0 of 0" not in summary
    assert "| branch | status |" not in summary
    page = html.render(results, [])
    assert "No recovery branch to report" in page
    assert "0 of 0" not in page
