"""The self-contained HTML report: crash-point grids, failing-case timelines, branch coverage."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from crashmatrix.harness.records.case import Case, CaseIdError, CrashStep
from crashmatrix.harness.records.results import CaseResult, Verdict, not_applicable
from crashmatrix.harness.records.run_record import Completeness
from crashmatrix.reports import cause
from crashmatrix.reports.coverage import branch_coverage

MAX_TIMELINES = 100  # failing cases drawn in full; the grid still shows every case
MAX_TEXT = 2000  # characters of one message or evidence dump
# A timeline lists at most this many events of one incarnation (a runaway emits thousands): the
# first ones, the last ones and the crash point, with a gap marked between.
MAX_EVENTS_HEAD, MAX_EVENTS_TAIL = 100, 50

# Worst first: a cell or group takes the colour of its worst case.
SEVERITY = (Verdict.FAIL, Verdict.ERROR, Verdict.SCENARIO_ERROR, Verdict.NONDETERMINISTIC, Verdict.PASS)
MARK = {Verdict.PASS: "✓", Verdict.FAIL: "✗", Verdict.NONDETERMINISTIC: "?", Verdict.ERROR: "!",
        Verdict.SCENARIO_ERROR: "S"}
WORD = {Verdict.PASS: "held", Verdict.FAIL: "violated", Verdict.NONDETERMINISTIC: "nondeterministic",
        Verdict.ERROR: "harness error", Verdict.SCENARIO_ERROR: "scenario error"}

# The page must not reach the network: the policy forbids every fetch, so an accidental external
# reference fails loudly (as a console error, which the browser test catches) instead of leaking.
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:80em}
h1{margin:0 0 .3em}h2{margin-top:1.6em;border-bottom:1px solid #ccc}h3{margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.4em 0}th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}code{font-size:13px}
.cell{text-align:center;min-width:3em}.cell a{color:inherit;text-decoration:none;display:block}
.v-pass{background:#d4f4d4}.v-fail{background:#f8c8c8}.v-nondeterministic{background:#fbe7a9}
.v-error{background:#e0d0f0}.v-scenario-error{background:#cfe3f8}.s-unreached,.s-undeclared{background:#f8c8c8;font-weight:bold}
.badge{padding:1px 6px;border-radius:3px}.legend span{margin-right:1em}
.timeline{border:1px solid #ccc;border-radius:4px;padding:.2em 1em;margin:1em 0}
.events{list-style:none;padding:0;margin:.2em 0;display:flex;flex-wrap:wrap;gap:3px}
.events li{background:#eee;border-radius:3px;padding:0 4px;font:12px monospace}
.events li.crash{background:#c00;color:#fff;font-weight:bold}
pre{white-space:pre-wrap;word-break:break-all;background:#f6f6f6;padding:.4em}
#completeness{padding:.3em .6em;font-weight:bold}
.c-incomplete{background:#f8c8c8}.c-unknown{background:#fbe7a9}
"""
# No `//` comments: the page is checked for the absence of anything that looks like a URL.
SCRIPT = """
(function () {
  var box = document.getElementById("only-bad");
  function apply() {
    var rows = document.querySelectorAll("table.grid tbody tr");
    for (var i = 0; i < rows.length; i++) {
      rows[i].hidden = box.checked && rows[i].getAttribute("data-held") === "1";
    }
  }
  box.addEventListener("change", apply);
  apply();
  document.body.setAttribute("data-grids", String(document.querySelectorAll("table.grid").length));
  document.body.setAttribute("data-rendered", "1");
})();
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _clip(text: object) -> str:
    s = str(text)
    return s if len(s) <= MAX_TEXT else s[: MAX_TEXT - 1] + "…"


def _worst(verdicts: Sequence[Verdict]) -> Verdict:
    return min(verdicts, key=SEVERITY.index)


@dataclass
class _Row:
    """One boundary of a scenario: the first crash step's event, its cases by fault, deeper cases."""

    n: int
    point: str
    by_fault: dict[str, CaseResult] = field(default_factory=dict)
    deeper: list[CaseResult] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return all(r.ok for r in [*self.by_fault.values(), *self.deeper])


@dataclass
class _Grid:
    rows: dict[tuple[int, str], _Row] = field(default_factory=dict)
    crash_free: list[CaseResult] = field(default_factory=list)
    stray: list[CaseResult] = field(default_factory=list)  # ids the grid cannot place


def _grids(results: Sequence[CaseResult]) -> dict[str, _Grid]:
    grids: dict[str, _Grid] = {}
    for r in results:
        grid = grids.setdefault(r.scenario, _Grid())
        try:
            schedule = Case.parse(r.case).schedule
        except CaseIdError:
            grid.stray.append(r)
            continue
        if not schedule:
            grid.crash_free.append(r)
            continue
        first: CrashStep = schedule[0]
        row = grid.rows.setdefault((first.n, first.point), _Row(first.n, first.point))
        if len(schedule) == 1:
            row.by_fault[first.fault] = r
        else:
            row.deeper.append(r)
    return grids


def _case_cell(r: CaseResult | None, anchors: dict[str, str]) -> str:
    if r is None:
        return '<td class="cell">·</td>'
    mark = MARK[r.verdict]
    if r.case in anchors:
        mark = f'<a href="#{anchors[r.case]}">{mark}</a>'
    return f'<td class="cell v-{r.verdict.value}" title="{_e(r.case)}: {WORD[r.verdict]}">{mark}</td>'


def _deeper_cell(cases: list[CaseResult], anchors: dict[str, str]) -> str:
    if not cases:
        return '<td class="cell">·</td>'
    held = sum(1 for r in cases if r.ok)
    worst = _worst([r.verdict for r in cases])
    title = f"{len(cases)} deeper case(s) after this crash: {held} held, {len(cases) - held} did not"
    text = f"{held}/{len(cases)}"
    linked = [anchors[r.case] for r in cases if r.case in anchors]
    if linked:  # the first failing deeper case's timeline
        text = f'<a href="#{linked[0]}">{text}</a>'
    return f'<td class="cell v-{worst.value}" title="{_e(title)}">{text}</td>'


def _grid_section(name: str, grid: _Grid, anchors: dict[str, str]) -> list[str]:
    cases = [*grid.crash_free, *grid.stray] + [r for row in grid.rows.values()
                                               for r in [*row.by_fault.values(), *row.deeper]]
    held = sum(1 for r in cases if r.ok)
    out = [f'<section class="scenario"><h3><code>{_e(name)}</code> — {len(cases)} case(s), {held} held</h3>']
    for r in grid.crash_free:
        out.append(f'<p>crash-free run: <span class="badge v-{r.verdict.value}" title="{_e(r.case)}">'
                   f"{WORD[r.verdict]}</span></p>")
    faults = sorted({f for row in grid.rows.values() for f in row.by_fault})
    deeper = any(row.deeper for row in grid.rows.values())
    heads = "".join(f"<th>{_e(f)}</th>" for f in faults) + ("<th>deeper: held/all</th>" if deeper else "")
    out.append(f'<table class="grid" data-scenario="{_e(name)}"><thead><tr><th>event</th>'
               f"<th>boundary</th>{heads}</tr></thead><tbody>")
    for key in sorted(grid.rows):
        row = grid.rows[key]
        cells = "".join(_case_cell(row.by_fault.get(f), anchors) for f in faults)
        if deeper:
            cells += _deeper_cell(row.deeper, anchors)
        out.append(f'<tr data-held="{int(row.held)}"><td class="n">{row.n:02d}</td>'
                   f"<td><code>{_e(row.point)}</code></td>{cells}</tr>")
    out.append("</tbody></table>")
    if grid.stray:
        out.append("<p>cases outside the grid: " + ", ".join(
            f'<span class="badge v-{r.verdict.value}">{_e(r.case)}</span>' for r in grid.stray) + "</p>")
    out.append("</section>")
    return out


def _coverage(results: Sequence[CaseResult], declared: Sequence[str]) -> list[str]:
    out = ['<table id="coverage"><thead><tr><th>recovery branch</th><th>status</th><th>cases</th>'
           "<th>example case</th></tr></thead><tbody>"]
    for c in branch_coverage(results, declared):
        out.append(f'<tr class="s-{c.status.value}"><td><code>{_e(c.branch)}</code></td>'
                   f'<td>{c.status.value}</td><td class="n">{c.cases}</td>'
                   f"<td><code>{_e(c.example_case or '—')}</code></td></tr>")
    out.append("</tbody></table>")
    return out


def _incarnation_name(r: CaseResult, i: int) -> str:
    # Incarnation 0 runs the task, one `recover` follows each crash, and the last is the settle
    # run when the case got that far (depth + 2 incarnations in all).
    if i == 0:
        return "run"
    return "settle" if i == len(r.trace) - 1 and len(r.trace) == r.depth + 2 else "recover"


def _timeline(r: CaseResult, anchor: str) -> list[str]:
    out = [f'<section class="timeline" id="{anchor}"><h3><code>{_e(r.case)}</code> '
           f'<span class="badge v-{r.verdict.value}">{WORD[r.verdict]}</span></h3><ul>']
    for v in r.violations:
        out.append(f"<li><code>{_e(v.get('invariant', '?'))}</code>: {_e(_clip(v.get('message', '')))}")
        if v.get("evidence"):
            text = json.dumps(v["evidence"], ensure_ascii=False, sort_keys=True, indent=1, default=str)
            out.append(f"<details><summary>evidence</summary><pre>{_e(_clip(text))}</pre></details>")
        out.append("</li>")
    out.append("</ul>")
    note = cause.note_shown(r)
    if note:
        out.append(f"<p>note: {_e(note)}</p>")
    out += _cause(r)
    out.append(f'<p>reproduce: <code class="repro">{_e(r.repro)}</code></p>')
    for i, events in enumerate(r.trace):
        crashed = r.crashed_at[i] if i < len(r.crashed_at) else None
        code = r.exit_codes[i] if i < len(r.exit_codes) else None
        end = f"killed at event {crashed}" if crashed is not None else f"exit code {code}"
        ms = f", {r.incarnation_ms[i]:.0f} ms" if i < len(r.incarnation_ms) else ""
        out.append(f"<h4>incarnation {i + 1} ({_incarnation_name(r, i)}): {end}{ms}</h4>"
                   '<ol class="events">')
        shown = _shown_events(len(events), crashed)
        for n, event in enumerate(events, 1):
            if n not in shown:
                if n - 1 in shown:
                    out.append(f'<li class="gap">… {_hidden_after(n, shown, len(events))} more …</li>')
                continue
            if n == crashed:
                out.append(f'<li class="crash" title="SIGKILL here">{n:02d} {_e(event)} ✕ killed</li>')
            else:
                out.append(f"<li>{n:02d} {_e(event)}</li>")
        out.append("</ol>")
    out.append("</section>")
    return out


def _cause(r: CaseResult) -> list[str]:
    """A scenario error's cause: its headline, then the evidence (a gap's last messages)."""
    if not r.scenario_error:
        return []
    out = [f'<div class="cause"><p><b>{_e(cause.title(r))}</b>: '
           f"{_e(_clip(cause.headline(r.scenario_error)))}</p>"]
    found = cause.details(r.scenario_error)
    if found:
        out.append("<pre>" + _e(_clip("\n".join(found))) + "</pre>")
    out.append("</div>")
    return out


def _shown_events(count: int, crashed: int | None) -> set[int]:
    """The event numbers a timeline lists: all of a short incarnation; of a long one the first
    and last ones and the crash point."""
    if count <= MAX_EVENTS_HEAD + MAX_EVENTS_TAIL:
        return set(range(1, count + 1))
    shown = set(range(1, MAX_EVENTS_HEAD + 1)) | set(range(count - MAX_EVENTS_TAIL + 1, count + 1))
    if crashed is not None:
        shown.add(crashed)
    return shown


def _hidden_after(n: int, shown: set[int], count: int) -> int:
    """How many events from `n` on are left out, up to the next one listed."""
    end = next((k for k in range(n, count + 1) if k in shown), count + 1)
    return end - n


def _completeness(c: Completeness | None) -> list[str]:
    if c is None or not c.line:
        return []
    return [f'<p id="completeness" class="c-{c.state.value}">{_e(c.line)}</p>']


def render(results: Sequence[CaseResult], declared: Sequence[str],
           completeness: Completeness | None = None) -> str:
    """The whole page, in the order given (the caller sorts); no clock, no I/O, no URLs."""
    bad = [r for r in results if not r.ok]
    anchors = {r.case: f"t{i}" for i, r in enumerate(bad[:MAX_TIMELINES], 1)}
    held = len(results) - len(bad)
    counts = ", ".join(f'<span class="badge v-{v.value}">{sum(1 for r in results if r.verdict is v)} '
                       f"{WORD[v]}</span>" for v in (Verdict.PASS, *SEVERITY[:-1]))
    out = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
           "<title>crashmatrix report</title>", f"<style>{CSS}</style></head><body>",
           "<h1>crashmatrix</h1>", *_completeness(completeness), f"<p>{len(results)} case(s): {counts}.</p>",
           '<p class="legend">' + "".join(f'<span><span class="badge v-{v.value}">{MARK[v]}</span> '
                                          f"{WORD[v]}</span>" for v in MARK) + "</p>",
           "<h2>Crash-point grids</h2>",
           "<p>Each row is a boundary: the first incarnation is killed at that probe event. "
           "Hover a cell for its case id; a failing cell links to its timeline.</p>",
           '<label><input type="checkbox" id="only-bad"> show only boundaries that did not hold</label>']
    for name, grid in sorted(_grids(results).items()):
        out += _grid_section(name, grid, anchors)
    na = not_applicable(results)
    if na:
        out += ['<h2 id="not-applicable">Not judged for this agent</h2>',
                "<p>Not judged, so not held: the evidence these invariants read is not available "
                "for this agent.</p>", "<ul>",
                *(f"<li><code>{_e(inv)}</code>: {_e(why)}</li>" for inv, why in na.items()), "</ul>"]
    out += ["<h2>Recovery-branch coverage</h2>", *_coverage(results, declared)]
    out.append(f"<h2>Failing cases ({len(bad)})</h2>")
    if not bad:
        out.append(f"<p>None: all {held} case(s) held.</p>")
    for r in bad[:MAX_TIMELINES]:
        out += _timeline(r, anchors[r.case])
    if len(bad) > MAX_TIMELINES:
        out.append(f"<p>{len(bad) - MAX_TIMELINES} more failing case(s) left out here; "
                   "each is in the grid above, in junit.xml and in results.jsonl.</p>")
    out += [f"<script>{SCRIPT}</script>", "</body></html>", ""]
    return "\n".join(out)
