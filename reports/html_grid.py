"""The crash-point grid of each scenario: a row per boundary, a cell per fault, deeper cases summed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from crashmatrix.harness.records.case import CrashStep
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.reports.groups import steps_of
from crashmatrix.reports.html_base import MARK, WORD, e, worst


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
class Grid:
    rows: dict[tuple[int, str], _Row] = field(default_factory=dict)
    crash_free: list[CaseResult] = field(default_factory=list)
    stray: list[CaseResult] = field(default_factory=list)  # ids the grid cannot place


def grids(results: Sequence[CaseResult]) -> dict[str, Grid]:
    out: dict[str, Grid] = {}
    for r in results:
        grid = out.setdefault(r.scenario, Grid())
        schedule = steps_of(r.case)
        if schedule is None:
            grid.stray.append(r)
            continue
        if not schedule:
            grid.crash_free.append(r)
            continue
        first: CrashStep = schedule[0]
        # A step counted apart from events is named with its mark: `s01:ftruncate:session.lock`
        # (the recording's call) and `f01:ftruncate:session.lock` (its settle's) are two rows.
        counted = first.at_call or first.downstream
        where = first.token().rpartition("/")[0] if counted else first.point
        row = grid.rows.setdefault((first.n, where), _Row(first.n, where))
        if len(schedule) == 1:
            # A fault's variant (`power-subsets:01`) is a column of its own: one state each.
            row.by_fault[first.token().rpartition("/")[2]] = r
        else:
            row.deeper.append(r)
    return out


def scenario_anchor(name: str) -> str:
    """The id of a scenario's grid section: ids may not hold spaces, and scenario names might."""
    return "s-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _case_cell(r: CaseResult | None, anchors: dict[str, str]) -> str:
    if r is None:
        return '<td class="cell">·</td>'
    mark = MARK[r.verdict]
    if r.case in anchors:
        mark = f'<a href="#{anchors[r.case]}">{mark}</a>'
    return f'<td class="cell v-{r.verdict.value}" title="{e(r.case)}: {WORD[r.verdict]}">{mark}</td>'


def _deeper_cell(cases: list[CaseResult], anchors: dict[str, str]) -> str:
    if not cases:
        return '<td class="cell">·</td>'
    held = sum(1 for r in cases if r.ok)
    bad = worst([r.verdict for r in cases])
    title = f"{len(cases)} deeper case(s) after this crash: {held} held, {len(cases) - held} did not"
    text = f"{held}/{len(cases)}"
    linked = [anchors[r.case] for r in cases if r.case in anchors]
    if linked:  # the first failing deeper case's timeline
        text = f'<a href="#{linked[0]}">{text}</a>'
    return f'<td class="cell v-{bad.value}" title="{e(title)}">{text}</td>'


def grid_section(name: str, grid: Grid, anchors: dict[str, str]) -> list[str]:
    cases = [*grid.crash_free, *grid.stray] + [r for row in grid.rows.values()
                                               for r in [*row.by_fault.values(), *row.deeper]]
    held = sum(1 for r in cases if r.ok)
    out = [f'<section class="scenario" id="{scenario_anchor(name)}" data-scenario="{e(name)}">'
           f"<h3><code>{e(name)}</code> — {len(cases)} case(s), {held} held</h3>"]
    for r in grid.crash_free:
        out.append(f'<p>crash-free run: <span class="badge v-{r.verdict.value}" title="{e(r.case)}">'
                   f"{WORD[r.verdict]}</span></p>")
    faults = sorted({f for row in grid.rows.values() for f in row.by_fault})
    deeper = any(row.deeper for row in grid.rows.values())
    heads = "".join(f"<th>{e(f)}</th>" for f in faults) + ("<th>deeper: held/all</th>" if deeper else "")
    out.append(f'<table class="grid" data-scenario="{e(name)}"><thead><tr><th>event</th>'
               f"<th>boundary</th>{heads}</tr></thead><tbody>")
    for key in sorted(grid.rows):
        row = grid.rows[key]
        cells = "".join(_case_cell(row.by_fault.get(f), anchors) for f in faults)
        if deeper:
            cells += _deeper_cell(row.deeper, anchors)
        out.append(f'<tr data-held="{int(row.held)}"><td class="n">{row.n:02d}</td>'
                   f"<td><code>{e(row.point)}</code></td>{cells}</tr>")
    out.append("</tbody></table>")
    if grid.stray:
        out.append("<p>cases outside the grid: " + ", ".join(
            f'<span class="badge v-{r.verdict.value}">{e(r.case)}</span>' for r in grid.stray) + "</p>")
    out.append("</section>")
    return out
