"""The side-by-side table: one cell per scenario and agent, the same whatever order cases finished in."""

from __future__ import annotations

import random

from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.reports.compare import (
    CellStatus,
    cell,
    compare,
    render_html,
    render_markdown,
    render_terminal,
)


def result(case: str, verdict: Verdict, *invariants: str) -> CaseResult:
    scenario = case.split("/", 1)[0]
    depth = 0 if case.endswith("/none") else case.count("+") + 1
    return CaseResult(case=case, scenario=scenario, depth=depth, verdict=verdict,
                      violations=[{"invariant": i, "message": "m"} for i in invariants],
                      repro=f"crashmatrix repro {case} --agent x")


BASELINE = [
    result("s/none", Verdict.PASS),
    result("s/12:effect.after:append_note/kill", Verdict.FAIL, "at-most-once", "scenario-oracle"),
    result("s/04:commit.after:m/kill", Verdict.FAIL, "pairing"),
    result("s/04:commit.after:m/kill+02:x:y/kill", Verdict.FAIL, "liveness"),
    result("s/05:commit.after:m/kill", Verdict.PASS),
]


def test_a_cell_names_every_violated_invariant_and_the_first_case_by_what_it_is() -> None:
    for _ in range(5):
        shuffled = random.sample(BASELINE, len(BASELINE))
        c = cell("s", "messages-only", shuffled)
        assert c.status is CellStatus.VIOLATED
        assert (c.cases, c.failing) == (5, 3)
        assert c.invariants == ("at-most-once", "liveness", "pairing", "scenario-oracle")
        assert c.first_case == "s/04:commit.after:m/kill"  # depth 1 before depth 2, then by id
        assert c.repro == "crashmatrix repro s/04:commit.after:m/kill --agent x"


def test_held_inconclusive_and_not_run_cells() -> None:
    held = [result("s/none", Verdict.PASS), result("s/01:a:b/kill", Verdict.PASS)]
    unproven = [*held, result("s/02:a:b/kill", Verdict.NONDETERMINISTIC)]
    cells = compare(["s", "t"], ["a", "b", "c"], {"a": held, "b": unproven, "c": held},
                    {("t", "c"): "needs inbox"})
    at = {(x.scenario, x.agent): x for x in cells}
    assert at["s", "a"].status is CellStatus.HELD
    assert at["s", "b"].status is CellStatus.INCONCLUSIVE
    assert at["s", "b"].first_case == "s/02:a:b/kill"
    assert at["t", "a"].status is CellStatus.INCONCLUSIVE  # nothing ran: never "held"
    assert at["t", "c"].status is CellStatus.NOT_RUN
    assert at["t", "c"].reason == "needs inbox"
    assert [(x.scenario, x.agent) for x in cells] == [("s", "a"), ("s", "b"), ("s", "c"),
                                                       ("t", "a"), ("t", "b"), ("t", "c")]


def test_the_renderers_show_each_cell_and_the_repro_of_each_one_that_did_not_hold() -> None:
    cells = compare(["s"], ["durable", "messages-only"],
                    {"durable": [result("s/none", Verdict.PASS)], "messages-only": BASELINE}, {})
    text = render_terminal(cells)
    assert "held (1)" in text
    assert "violated 3/5: at-most-once, liveness, pairing, scenario-oracle" in text
    assert "reproduce: crashmatrix repro s/04:commit.after:m/kill --agent x" in text
    md = render_markdown(cells)
    assert "| s | held (1) | violated 3/5: at-most-once, liveness, pairing, scenario-oracle |" in md
    assert "`crashmatrix repro s/04:commit.after:m/kill --agent x`" in md


def test_the_markdown_brings_no_raw_html_from_names_or_reasons() -> None:
    why = "agent <script>x</script> lacks `inbox`"
    cells = compare(["s"], ["<img src=x>"], {}, {("s", "<img src=x>"): why})
    md = render_markdown(cells)
    assert "<img" not in md
    span = "`` agent <script>x</script> lacks `inbox` ``"  # a code span shows it as text
    assert f"not run: {span}" in md
    assert "<script" not in md.replace(span, "")
    assert "&lt;img src=x&gt;" in md


def test_the_page_escapes_what_it_shows() -> None:
    evil = [result("s/01:a:<b>/kill", Verdict.FAIL, "pairing")]
    page = render_html(compare(["s"], ["<x>"], {"<x>": evil}, {}))
    assert "<b>" not in page.split("<body>", 1)[1].replace("<br>", "")
    assert "&lt;x&gt;" in page
    assert "&lt;b&gt;" in page


def test_the_first_failing_case_counts_event_numbers_as_numbers() -> None:
    late = [result("s/100:commit.after:m/kill", Verdict.FAIL, "pairing"),
            result("s/99:commit.after:m/kill", Verdict.FAIL, "pairing")]
    assert cell("s", "a", late).first_case == "s/99:commit.after:m/kill"
