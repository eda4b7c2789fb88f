"""The renderers: Markdown size and content, JUnit structure and counts, a self-contained HTML page."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.reports import html, junit, markdown
from tests.unit.test_reports_data import DECLARED, FAILING, REPRO, make, sample_results, step


def many_failures(count: int) -> list[CaseResult]:
    long = "x" * 5000  # long messages must be clipped, not carried whole
    return [make(Case(f"s{i // 17:04d}", (step(1 + i % 17),)), Verdict.FAIL,
                 violations=[{"invariant": "at-most-once", "message": f"{long} {i}", "evidence": [long]}] * 8)
            for i in range(count)]


# --- Markdown ---------------------------------------------------------------------------------

def test_markdown_has_totals_scenarios_failures_with_repro_and_coverage() -> None:
    text = markdown.render(sample_results(), DECLARED)
    assert ("**27** cases: 22 held, 2 violated, 1 nondeterministic, 1 harness errors, "
            "1 scenario errors") in text
    assert "| `changelog` | 22 | 20 | 2 | 0 | 0 | 0 |" in text
    assert "| `tool-stop` | 5 | 2 | 0 | 1 | 1 | 1 |" in text
    assert f"- `{FAILING}`: fail (at-most-once, scenario-oracle)" in text
    assert "  - `at-most-once`: `append_note ran twice: 2 lines in CHANGELOG.md`" in text
    assert f"  - reproduce: `{REPRO}`" in text
    assert "| `close.budget_exhausted` | **never reached** | 0 | — |" in text
    assert "3 of 4 declared recovery branches reached; **1 never reached**." in text


def test_markdown_stays_under_one_mebibyte_with_twenty_thousand_failures() -> None:
    text = markdown.render(many_failures(20_000), DECLARED)
    assert len(text.encode()) < markdown.MAX_BYTES <= 1024 * 1024
    listed = text.count("  - reproduce: ")
    assert 0 < listed <= markdown.MAX_FAILURES
    assert f"*{20_000 - listed} more failing case(s) left out" in text
    assert "## Recovery-branch coverage" in text  # the tail survives the cut


def test_markdown_code_spans_hold_backticks_and_table_cells_hold_pipes() -> None:
    r = make(Case("a|b", (step(3),)), Verdict.FAIL,
             violations=[{"invariant": "pairing", "message": "saw ``x`` then\nnewline"}])
    text = markdown.render([r], ["x|y"])
    assert "```saw ``x`` then newline```" in text
    assert "| `a\\|b` |" in text
    assert "| `x\\|y` | **never reached** |" in text
    assert markdown.code("`edge`") == "`` `edge` ``"


# --- JUnit ------------------------------------------------------------------------------------

def test_junit_parses_and_its_counts_match_the_results() -> None:
    results = sample_results()
    root = ET.fromstring(junit.render(results).encode())
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == (str(len(results)), "2", "3")
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"changelog", "tool-stop"}
    for name, suite in suites.items():
        mine = [r for r in results if r.scenario == name]
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == [r.case for r in mine]
        assert {c.get("classname") for c in cases} == {f"crashmatrix.{name}"}
        assert suite.get("tests") == str(len(cases))
        assert suite.get("failures") == str(len(suite.findall("testcase/failure")))
        assert suite.get("errors") == str(len(suite.findall("testcase/error")))
    assert cases[0].get("time") == "1.234"


def test_a_forced_failure_carries_invariants_messages_and_the_repro_command() -> None:
    root = ET.fromstring(junit.render(sample_results()).encode())
    (case,) = [c for c in root.iter("testcase") if c.get("name") == FAILING]
    failure = case.find("failure")
    assert failure is not None
    assert failure.text is not None
    assert failure.get("message") == "at-most-once, scenario-oracle"
    assert failure.get("type") == "at-most-once"
    assert "at-most-once: append_note ran twice: 2 lines in CHANGELOG.md" in failure.text
    assert "scenario-oracle: CHANGELOG.md differs" in failure.text
    assert failure.text.rstrip().endswith(f"reproduce: {REPRO}")
    errors = {c.get("name"): c.find("error") for c in root.iter("testcase") if c.find("error") is not None}
    assert {e.get("type") for e in errors.values() if e is not None} == {
        "nondeterministic", "error", "scenario-error"}


def test_junit_survives_markup_and_control_characters() -> None:
    nasty = 'a <b> & "c" \x00\x1b]0;title\x07 ]]> é'
    r = make(Case("s", (step(2),)), Verdict.FAIL, violations=[{"invariant": "pairing", "message": nasty}])
    failure = ET.fromstring(junit.render([r]).encode()).find("testsuite/testcase/failure")
    assert failure is not None
    assert failure.text is not None
    assert 'a <b> & "c" \ufffd\ufffd]0;title\ufffd ]]> é' in failure.text


# --- HTML -------------------------------------------------------------------------------------

class Links(HTMLParser):
    """Every src/href/action value, and every tag name, of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self.refs += [v or "" for k, v in attrs if k in ("src", "href", "action", "srcset", "poster")]


def parse(page: str) -> Links:
    links = Links()
    links.feed(page)
    return links


def test_html_has_no_external_reference_at_all() -> None:
    page = html.render(sample_results(), DECLARED)
    for needle in ("http://", "https://", "//", "url(", "@import"):
        assert needle not in page
    links = parse(page)
    assert links.refs, "the failing cells link to their timelines"
    # Every link is to a place on the page itself.
    ids = {a.get("id") for _, a in links.tags if a.get("id")}
    assert [ref for ref in links.refs if not re.fullmatch(r"#[\w.-]+", ref) or ref[1:] not in ids] == []
    assert not [t for t, _ in links.tags if t in ("link", "img", "iframe", "object", "embed", "base")]
    assert not [a for t, a in links.tags if t == "script" and "src" in a]


def test_html_grid_has_a_titled_cell_per_case_in_event_order() -> None:
    results = sample_results()
    links = parse(html.render(results, DECLARED))
    titles = [a.get("title") or "" for t, a in links.tags if t == "td" and "v-" in (a.get("class") or "")]
    singles = [r for r in results if r.depth == 1]
    assert [t.split(": ")[0] for t in titles if not t[0].isdigit()] == [r.case for r in singles]
    assert "4 deeper case(s) after this crash: 3 held, 1 did not" in titles
    fail_cell = [a for t, a in links.tags if t == "td" and (a.get("title") or "").startswith(FAILING + ":")]
    assert fail_cell[0]["class"] == "cell v-fail"


def test_html_grid_keeps_a_recording_s_call_and_its_settle_s_call_apart() -> None:
    # Same number, same call, same file: one crashes the recording, the other its settle.
    results = [make(Case("changelog")),
               *(make(Case.parse(f"changelog/{mark}01:ftruncate:session.lock/kill"), verdict)
                 for mark, verdict in (("s", Verdict.PASS), ("f", Verdict.FAIL)))]
    page = html.render(results, DECLARED)
    rows = re.findall(r'<tr data-held="(\d)"><td class="n">01</td><td><code>([^<]+)</code>', page)
    assert rows == [("0", "f01:ftruncate:session.lock"), ("1", "s01:ftruncate:session.lock")]


def test_html_grid_gives_each_variant_of_a_point_a_cell_of_its_own() -> None:
    # The parent and its siblings: a failing subset must not hide behind a held one.
    point = "changelog/12:commit.written:tool_started.append_note/power-subsets"
    results = [make(Case("changelog")), make(Case.parse(point)),
               make(Case.parse(f"{point}:01"), Verdict.FAIL), make(Case.parse(f"{point}:11"))]
    page = html.render(results, DECLARED)
    cells = re.findall(r'<td class="cell v-(\w+)" title="([^"]+?): ', page)
    assert cells == [("pass", point), ("fail", f"{point}:01"), ("pass", f"{point}:11")]


def test_html_draws_a_timeline_per_failing_case_and_the_coverage_table() -> None:
    page = html.render(sample_results(), DECLARED)
    assert page.count('<details class="case"') == 5
    assert '<li class="crash" title="SIGKILL here">13 effect.after:append_note ✕ killed</li>' in page
    assert f'<code class="repro">{REPRO}</code>' in page
    assert "incarnation 3 (settle): exit code 0" in page
    assert "&lt;b&gt;&amp;" in page
    assert "<b>&" not in page
    for branch in DECLARED:
        assert f"<td><code>{branch}</code></td>" in page
    assert '<tr class="s-unreached"><td><code>close.budget_exhausted</code></td>' in page


def test_html_caps_timelines_but_not_the_grid() -> None:
    results = many_failures(html.MAX_TIMELINES + 30)
    page = html.render(results, DECLARED)
    assert page.count('<details class="case"') == html.MAX_TIMELINES
    assert page.count('<li class="case"') == 30, "the rest are listed by id, with their repro line"
    assert "30 more failing case(s) not drawn in full here" in page
    assert page.count('class="cell v-fail"') == len(results)
