"""The self-contained HTML report: index, distinct failures, crash-point grids, branch coverage."""

from __future__ import annotations

from collections.abc import Sequence

from crashmatrix.harness.records.results import CaseResult, Verdict, not_applicable
from crashmatrix.harness.records.run_record import Completeness, LineCoverageRecord, StatesRecord
from crashmatrix.reports import html_case
from crashmatrix.reports.fixes import doc_link, violated_fixes
from crashmatrix.reports.groups import FailureGroup, distinct_failures, faults_of
from crashmatrix.reports.header import Header
from crashmatrix.reports.html_base import MARK, SEVERITY, WORD, badge, e
from crashmatrix.reports.html_grid import grid_section, grids
from crashmatrix.reports.html_groups import drawn_in_full, scenarios_of, verdict_of
from crashmatrix.reports.html_index import (
    coverage_summary,
    coverage_table,
    crash_states,
    index,
    line_coverage,
)
from crashmatrix.reports.html_style import CSP, CSS, SCRIPT

MAX_TIMELINES = 100  # failing cases drawn in full (every distinct failure's first one comes first)
# Failing cases a group lists by id (with a link when drawn in full) beyond those drawn: a run with
# 10,000 failures of one cause stays a page, not a phone book; the grid still shows every case.
MAX_LISTED = 200
# Bytes of the drawn timelines together: a case's requests, store and diffs can be long, and a
# page of 100 of them must still open in a browser. Past it, the remaining failing cases are
# listed by id with their repro line instead of drawn (like summary.md's MAX_BYTES).
MAX_TIMELINE_BYTES = 8 * 1024 * 1024


def _header(h: Header | None) -> list[str]:
    if h is None:
        return []
    rows = "".join(f"<tr><th>{e(label)}</th><td>{e(text)}</td></tr>" for label, text in h.fields())
    return [f'<table id="header">{rows}</table>']


def _completeness(c: Completeness | None) -> list[str]:
    if c is None or not c.line:
        return []
    return [f'<p id="completeness" class="c-{c.state.value}">{e(c.line)}</p>']


def _select(name: str, label: str, values: Sequence[str]) -> str:
    options = "".join(f'<option value="{e(v)}">{e(v)}</option>' for v in values)
    return (f'<label>{label} <select id="f-{name}"><option value="">all</option>{options}'
            "</select></label>")


def _filters(bad: Sequence[CaseResult]) -> list[str]:
    verdicts = [v.value for v in SEVERITY if any(r.verdict is v for r in bad)]
    invariants = sorted({i for r in bad for i in r.invariants})
    faults = sorted({f for r in bad for f in faults_of(r.case)})
    scenarios = sorted({r.scenario for r in bad})
    return ['<p id="filters">', _select("verdict", "verdict", verdicts),
            _select("invariant", "invariant", invariants), _select("fault", "fault", faults),
            _select("scenario", "scenario", scenarios), "</p>"]


def _case_attrs(r: CaseResult) -> str:
    # Space-separated lists: the filter matches one word of them.
    return (f'data-case="{e(r.case)}" data-verdict="{r.verdict.value}" '
            f'data-invariants="{e(" ".join(r.invariants))}" data-faults="{e(" ".join(faults_of(r.case)))}" '
            f'data-scenario="{e(r.scenario)}"')


class Budget:
    """What is left of MAX_TIMELINE_BYTES, and how many drawn cases it turned into listed ones."""

    def __init__(self, limit: int) -> None:
        self.left, self.over = limit, 0

    def take(self, lines: list[str]) -> bool:
        size = sum(len(line.encode("utf-8")) + 1 for line in lines)
        if size > self.left:
            self.over += 1
            return False
        self.left -= size
        return True


def _listed(r: CaseResult, anchor: str) -> str:
    return (f'<li class="case" id="{anchor}" {_case_attrs(r)}><code>{e(r.case)}</code> '
            f'{badge(r.verdict)} — reproduce: <code class="repro">{e(r.repro)}</code></li>')


def _group(g: FailureGroup, number: int, full: set[str], anchors: dict[str, str],
           budget: Budget) -> list[str]:
    scenarios = ", ".join(scenarios_of(g))
    also = [i for i in g.invariants if i != g.key.root]
    about = f" on <code>{e(g.key.subject)}</code>" if g.key.subject else ""
    out = [f'<details class="group" id="g{number}" data-cases="{len(g.cases)}" '
           f'data-root="{e(g.key.root)}" data-subject="{e(g.key.subject)}" '
           f'data-invariants="{e(" ".join(g.invariants))}" data-places="{e("; ".join(g.places))}"'
           f'{" open" if number == 1 else ""}>'
           f"<summary>{badge(verdict_of(g))} <code>{e(g.key.root)}</code>{about}"
           + (f" (also broke {', '.join(f'<code>{e(i)}</code>' for i in also)})" if also else "")
           + f" — seen at {e(', '.join(g.places))} — "
           f'<span class="count">{len(g.cases)} case(s)</span> in {e(scenarios)}</summary>']
    listed: list[str] = []
    first = True
    for r in g.cases:
        anchor = anchors.get(r.case)
        if anchor is None:
            continue
        drawn: list[str] = []
        if r.case in full:
            drawn = [f'<details class="case" id="{anchor}" {_case_attrs(r)}{" open" if first else ""}>'
                     f"<summary><code>{e(r.case)}</code> {badge(r.verdict)}</summary>",
                     *html_case.body(r, anchor), "</details>"]
        if drawn and budget.take(drawn):
            out += drawn
            first = False
        else:
            listed.append(_listed(r, anchor))
    if listed:
        out.append("<p>Also in this group (not drawn in full, to keep the page small):</p>")
        out += ['<ul class="listed">', *listed, "</ul>"]
    hidden = sum(1 for r in g.cases if r.case not in anchors)
    if hidden:
        out.append(f"<p>{hidden} more case(s) of this group left out here; each is in the grid "
                   "below, in junit.xml and in results.jsonl.</p>")
    out.append("</details>")
    return out


def _anchors(found: Sequence[FailureGroup], full: set[str]) -> dict[str, str]:
    """An id for every case the page shows (drawn, or listed), numbered in page order."""
    out: dict[str, str] = {}
    for g in found:
        shown = [r for r in g.cases if r.case in full]
        shown += [r for r in g.cases if r.case not in full][:MAX_LISTED]
        for r in sorted(shown, key=lambda r: (r.case not in full, g.cases.index(r))):
            out[r.case] = f"t{len(out) + 1}"
    return out


def render(results: Sequence[CaseResult], declared: Sequence[str],
           completeness: Completeness | None = None, lines: LineCoverageRecord | None = None,
           states: StatesRecord | None = None, notes: Sequence[str] = (),
           header: Header | None = None) -> str:
    """The whole page, in the order given (the caller sorts); no clock, no I/O, no URLs.
    `lines`: run.json's `line_coverage`, shown (total, link) when the run measured it; `states`:
    its `crash_states`, shown when the run started cases from crash states; `notes`: what the run
    could not promise, at the top."""
    bad = [r for r in results if not r.ok]
    found = distinct_failures(results)
    full = drawn_in_full(found, MAX_TIMELINES)
    anchors = _anchors(found, full)
    held = len(results) - len(bad)
    counts = ", ".join(f'<span class="badge v-{v.value}">{sum(1 for r in results if r.verdict is v)} '
                       f"{WORD[v]}</span>" for v in (Verdict.PASS, *SEVERITY[:-1]))
    out = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
           "<title>crashmatrix report</title>", f"<style>{CSS}</style></head><body>",
           "<h1>crashmatrix</h1>", *_completeness(completeness),
           *(f'<p class="run-note c-incomplete">{e(note)}</p>' for note in notes),
           *_header(header),
           f'<p id="totals">{len(results)} case(s): {counts}; {len(found)} distinct failure(s).</p>',
           *line_coverage(lines),
           *crash_states(states),
           *coverage_summary(results, declared),
           '<h2 id="scenarios">Scenarios</h2>', *index(results, found),
           f'<h2 id="failures">Distinct failures ({len(found)}; {len(bad)} failing case(s))</h2>']
    fixes = violated_fixes(results)
    if fixes:  # before the cases: what to do about them, named by the invariant's section
        out.append('<details id="fixes" open><summary>How agents usually fix what was found</summary><ul>'
                   + "".join(f"<li><code>{e(inv)}</code>: {e(text)} ({e(doc_link(inv))})</li>"
                             for inv, text in fixes) + "</ul></details>")
    if not bad:
        out.append(f"<p>None: all {held} case(s) held.</p>")
    else:
        out.append("<p>Failing cases grouped by root cause, one group per case: the first "
                   "invariant it broke in the verifier's order (the others are usually its "
                   "consequences, and are listed), and the tool, service or file that violation "
                   "is about; a verdict without a violation is its own cause. Open a group for its cases, "
                   "a case for its timeline (a lane per incarnation), the files before and after "
                   "(a line an effect doubled is marked ⚠), the requests the model got and the "
                   "store each incarnation left.</p>")
        out += _filters(bad)
        budget = Budget(MAX_TIMELINE_BYTES)
        groups = [line for number, g in enumerate(found, 1)
                  for line in _group(g, number, full, anchors, budget)]
        if budget.over:
            out.append(f'<p id="over-budget">{budget.over} failing case(s) not drawn: the timelines '
                       f"drawn reached this page's budget ({MAX_TIMELINE_BYTES // (1024 * 1024)} MiB); "
                       "they are listed by id in their group, with the command that reproduces "
                       "each.</p>")
        out += groups
        undrawn = len(bad) - len(full)
        if undrawn:
            out.append(f"<p>{undrawn} more failing case(s) not drawn in full here; "
                       "each is in the grid below, in junit.xml and in results.jsonl.</p>")
    out += ["<h2>Crash-point grids</h2>",
            "<p>Each row is a boundary: the first incarnation is killed at that probe event. "
            "Hover a cell for its case id; a failing cell links to its case.</p>",
            '<p class="legend">' + "".join(f'<span><span class="badge v-{v.value}">{MARK[v]}</span> '
                                           f"{WORD[v]}</span>" for v in MARK) + "</p>",
            '<label><input type="checkbox" id="only-bad"> show only boundaries that did not hold</label>']
    for name, grid in sorted(grids(results).items()):
        out += grid_section(name, grid, anchors)
    na = not_applicable(results)
    if na:
        out += ['<h2 id="not-applicable">Not judged for this agent</h2>',
                "<p>Not judged, so not held: the evidence these invariants read is not available "
                "for this agent.</p>", "<ul>",
                *(f"<li><code>{e(inv)}</code>: {e(why)}</li>" for inv, why in na.items()), "</ul>"]
    out += ['<h2 id="coverage-table">Recovery-branch coverage</h2>', *coverage_table(results, declared)]
    out += [f"<script>{SCRIPT}</script>", "</body></html>", ""]
    return "\n".join(out)
