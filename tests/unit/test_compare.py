"""The side-by-side table: one cell per scenario and agent, the same whatever order cases finished in."""

from __future__ import annotations

import dataclasses
import random

from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.reports.compare import (
    CellStatus,
    cell,
    compare,
    judged,
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
    held = [result("s/none", Verdict.PASS), result("s/01:a:b/kill", Verdict.PASS)]
    cells = compare(["s"], ["durable", "messages-only"], {"durable": held, "messages-only": BASELINE}, {})
    text = render_terminal(cells)
    assert "held (2)" in text
    assert "violated 3/5: at-most-once, liveness, pairing, scenario-oracle" in text
    assert "reproduce: crashmatrix repro s/04:commit.after:m/kill --agent x" in text
    md = render_markdown(cells)
    assert "| s | held (2) | violated 3/5: at-most-once, liveness, pairing, scenario-oracle |" in md
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


def test_a_matrix_that_crashed_nothing_is_no_held_cell() -> None:
    """O1 in compare: only the crash-free recording ran (an agent whose probes never attach): the
    cell is inconclusive and says why, in every renderer."""
    only = [result("s/none", Verdict.PASS)]
    cells = compare(["s"], ["detached"], {"detached": only}, {})
    assert cells[0].status is CellStatus.INCONCLUSIVE
    assert cells[0].reason is not None
    assert cells[0].reason.startswith("no case crashed anything: its crash-free run reported no probe event")
    assert "inconclusive: crashed nothing" in render_terminal(cells)
    assert "s x detached: no case crashed anything" in render_terminal(cells)
    assert "**s x detached**: no case crashed anything" in render_markdown(cells)
    assert "no case crashed anything" in render_html(cells)


def test_every_renderer_says_what_each_agent_was_not_judged_on() -> None:
    """O2: "held" beside "held" says how many invariants each agent was not judged on, and the
    renderers list which and why."""
    registry = ["pairing", "one-writer", "at-most-once"]
    full = [result("s/none", Verdict.PASS), result("s/01:a:b/kill", Verdict.PASS)]
    for r in full:
        r.exercised = ["pairing", "one-writer", "at-most-once"]
    partial = [dataclasses.replace(r, not_applicable=[
        {"invariant": "one-writer", "reason": "no 'concurrent' capability"}]) for r in full]
    judgements = {"ours": judged("ours", full, registry), "theirs": judged("theirs", partial, registry)}
    assert judgements["theirs"].judged == ("pairing", "at-most-once")
    assert judgements["theirs"].unjudged == 1
    assert judgements["ours"].unjudged == 0
    cells = compare(["s"], ["ours", "theirs"], {"ours": full, "theirs": partial}, {}, judgements)
    shown = list(judgements.values())
    text = render_terminal(cells, shown)
    assert "held (2)" in text
    assert "held (2; 1 not judged)" in text
    assert "theirs: 2 invariants judged" in text
    assert "not judged: one-writer: no 'concurrent' capability" in text
    md = render_markdown(cells, judgements=shown)
    assert "held (2; 1 not judged)" in md
    assert "one-writer" in md.split("## What each agent was judged on")[1]
    page = render_html(cells, judgements=shown)
    assert "not judged: one-writer: no &#x27;concurrent&#x27; capability" in page
