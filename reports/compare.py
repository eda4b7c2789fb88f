"""Side by side: one crash matrix run against several agents, as a scenario x agent table. Pure.

Each cell says what that agent did on that scenario's matrix: held (every case), violated (which
invariants, on how many cases, the first failing case and the command that reproduces it),
inconclusive (no violation, but cases that proved nothing: nondeterministic or in error, or no
case crashed anything), or not run (the agent cannot take the scenario, and why). "First" is by
what the case is (depth, then its steps), never by when it finished, so the table is the same
whatever `--jobs`.

"held" means as much as what was judged: an agent for which 12 invariants could not be judged
holds fewer promises than one judged on all. So a held cell carries how many invariants were not
judged for its agent, and every renderer lists, per agent, which and why (`Judged`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from html import escape
from typing import Any

from tabulate import tabulate

from crashmatrix.harness.records.results import CaseResult, Verdict, not_applicable
from crashmatrix.harness.records.uncrashed import uncrashed
from crashmatrix.reports.groups import steps_of
from crashmatrix.reports.html_style import CSP, CSS
from crashmatrix.reports.markdown import code


class CellStatus(StrEnum):
    HELD = "held"
    VIOLATED = "violated"
    INCONCLUSIVE = "inconclusive"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class Cell:
    scenario: str
    agent: str
    status: CellStatus
    cases: int = 0
    failing: int = 0  # cases that violated an invariant
    unproven: int = 0  # cases nondeterministic or in error
    invariants: tuple[str, ...] = ()  # violated somewhere in the matrix, sorted
    first_case: str | None = None
    repro: str | None = None
    reason: str | None = None  # why NOT_RUN, or why INCONCLUSIVE when no case says it
    unjudged: int = 0  # invariants not judged (at all) for this agent: its `Judged`

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "agent": self.agent, "status": self.status.value,
                "cases": self.cases, "failing": self.failing, "unproven": self.unproven,
                "invariants": list(self.invariants), "first_case": self.first_case,
                "repro": self.repro, "reason": self.reason, "unjudged": self.unjudged}


@dataclass(frozen=True)
class Judged:
    """What one agent's cells rest on: the invariants judged, those not (with why), and those
    judged but never exercised by any case (they held vacuously)."""

    agent: str
    judged: tuple[str, ...]
    not_judged: dict[str, str]  # invariant -> why (a "partly judged" reason for one judged in part)
    never_exercised: tuple[str, ...]

    @property
    def unjudged(self) -> int:
        return sum(1 for why in self.not_judged.values() if not why.startswith("partly judged"))

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "judged": list(self.judged), "not_judged": self.not_judged,
                "never_exercised": list(self.never_exercised)}


def judged(agent: str, results: Sequence[CaseResult], registry: Sequence[str]) -> Judged:
    """`registry`: every invariant the verifier runs, in its order (the CLI passes it in)."""
    reasons = not_applicable(results)
    whole = {i for i, why in reasons.items() if not why.startswith("partly judged")}
    judged_ = tuple(i for i in registry if i not in whole) if results else ()
    known = [r.exercised for r in results if r.exercised is not None]
    arose = {i for names in known for i in names}
    never = tuple(i for i in judged_ if i not in arose) if known else ()
    return Judged(agent, judged_, reasons, never)


def _order(r: CaseResult) -> tuple[int, tuple[tuple[int, str, str, str], ...], str]:
    # By what the case is: depth, then each step's number as a number (a 100th event after a 99th).
    schedule = steps_of(r.case) or ()
    return (r.depth, tuple((s.n, s.kind, s.label, s.fault) for s in schedule), r.case)


def cell(scenario: str, agent: str, results: Sequence[CaseResult]) -> Cell:
    """The cell of one agent's results on one scenario."""
    mine = sorted((r for r in results if r.scenario == scenario), key=_order)
    failing = [r for r in mine if r.verdict in (Verdict.FAIL, Verdict.SCENARIO_ERROR)]
    unproven = [r for r in mine if r.verdict in (Verdict.NONDETERMINISTIC, Verdict.ERROR)]
    if failing:
        first = failing[0]
        return Cell(scenario, agent, CellStatus.VIOLATED, len(mine), len(failing), len(unproven),
                    tuple(sorted({i for r in failing for i in r.invariants})), first.case, first.repro)
    if unproven or not mine:
        first_unproven = unproven[0] if unproven else None
        return Cell(scenario, agent, CellStatus.INCONCLUSIVE, len(mine), 0, len(unproven),
                    first_case=first_unproven.case if first_unproven else None,
                    repro=first_unproven.repro if first_unproven else None,
                    reason=None if mine else "no case ran")
    idle = uncrashed(mine).get(scenario)
    if idle is not None:  # every case held, but none crashed anything: nothing was tested
        return Cell(scenario, agent, CellStatus.INCONCLUSIVE, len(mine),
                    reason=f"no case crashed anything: {idle}")
    return Cell(scenario, agent, CellStatus.HELD, len(mine))


def compare(scenarios: Sequence[str], agents: Sequence[str],
            results: Mapping[str, Sequence[CaseResult]],
            not_run: Mapping[tuple[str, str], str],
            judgements: Mapping[str, Judged] | None = None) -> list[Cell]:
    """Every cell, scenario by scenario in the order given, agents in the order given.
    `not_run`: (scenario, agent) -> why that agent did not run that scenario. `judgements`: per
    agent, what was judged (each cell then carries its agent's count of invariants not judged)."""
    out = []
    for s in scenarios:
        for a in agents:
            why = not_run.get((s, a))
            c = (Cell(s, a, CellStatus.NOT_RUN, reason=why) if why is not None
                 else cell(s, a, results.get(a, ())))
            if judgements is not None and a in judgements and c.status is not CellStatus.NOT_RUN:
                c = replace(c, unjudged=judgements[a].unjudged)
            out.append(c)
    return out


def _short(c: Cell) -> str:
    if c.status is CellStatus.HELD:
        return f"held ({c.cases}; {c.unjudged} not judged)" if c.unjudged else f"held ({c.cases})"
    if c.status is CellStatus.VIOLATED:
        return f"violated {c.failing}/{c.cases}: {', '.join(c.invariants)}"
    if c.status is CellStatus.INCONCLUSIVE:
        if c.unproven:
            return f"inconclusive: {c.unproven} of {c.cases} proved nothing"
        return "inconclusive: crashed nothing" if c.cases else "inconclusive"
    return "not run"


def _judged_lines(j: Judged) -> list[str]:
    """Plain lines saying what an agent's cells rest on (each renderer escapes them its way)."""
    lines = [f"{j.agent}: {len(j.judged)} invariants judged"]
    lines += [f"not judged: {inv}: {why}" for inv, why in j.not_judged.items()]
    if j.never_exercised:
        lines.append(f"judged but never exercised (held vacuously): {', '.join(j.never_exercised)}")
    return lines


def _grid(cells: Sequence[Cell]) -> tuple[list[str], list[str], dict[tuple[str, str], Cell]]:
    scenarios = list(dict.fromkeys(c.scenario for c in cells))
    agents = list(dict.fromkeys(c.agent for c in cells))
    return scenarios, agents, {(c.scenario, c.agent): c for c in cells}


def _details(cells: Sequence[Cell]) -> list[Cell]:
    return [c for c in cells if c.status is not CellStatus.HELD]


def render_terminal(cells: Sequence[Cell], judgements: Sequence[Judged] = ()) -> str:
    scenarios, agents, at = _grid(cells)
    table = tabulate([[s, *(_short(at[s, a]) for a in agents)] for s in scenarios],
                     headers=["scenario", *agents])
    lines = [table]
    details = _details(cells)
    if details:
        # Below the table, not in it: a command is copied whole, and a column would wrap it.
        lines += ["", "first failing case of each cell that did not hold:"]
        for c in details:
            if c.status is CellStatus.NOT_RUN:
                lines.append(f"  {c.scenario} x {c.agent}: not run: {c.reason}")
            elif c.first_case is not None:
                lines.append(f"  {c.scenario} x {c.agent}: {c.first_case}")
                lines.append(f"      reproduce: {c.repro}")
            elif c.reason:
                lines.append(f"  {c.scenario} x {c.agent}: {c.reason}")
    if judgements:
        lines += ["", "what each agent was judged on:"]
        for j in judgements:
            first, *rest = _judged_lines(j)
            lines += [f"  {first}", *(f"      {line}" for line in rest)]
    return "\n".join(lines)


def _md(text: str) -> str:
    """Plain Markdown text that renders as written: no HTML an agent's name or reason brings goes
    into the page raw (a viewer that renders Markdown renders inline HTML), and no cell split."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def render_markdown(cells: Sequence[Cell], title: str = "crashmatrix compare",
                    judgements: Sequence[Judged] = ()) -> str:
    scenarios, agents, at = _grid(cells)
    out = [f"# {title}", "", "| scenario | " + " | ".join(_md(a) for a in agents) + " |",
           "| --- |" + " --- |" * len(agents)]
    out += ["| " + " | ".join([_md(s), *(_md(_short(at[s, a])) for a in agents)]) + " |" for s in scenarios]
    details = _details(cells)
    if details:
        out += ["", "## First failing case per cell", ""]
        for c in details:
            if c.status is CellStatus.NOT_RUN:
                # A reason quotes names and errors as they are: shown in a code span (issue 33, M3).
                out.append(f"- **{_md(c.scenario)} x {_md(c.agent)}**: not run: {code(c.reason or '')}")
            elif c.first_case is not None:
                out.append(f"- **{_md(c.scenario)} x {_md(c.agent)}**: `{c.first_case}`; "
                           f"reproduce: `{c.repro}`")
            elif c.reason:
                out.append(f"- **{_md(c.scenario)} x {_md(c.agent)}**: {_md(c.reason)}")
    if judgements:
        out += ["", "## What each agent was judged on", ""]
        for j in judgements:
            first, *rest = _judged_lines(j)
            out.append(f"- **{_md(first)}**")
            out += [f"  - {_md(line)}" for line in rest]
    return "\n".join(out) + "\n"


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def render_html(cells: Sequence[Cell], title: str = "crashmatrix compare",
                links: Mapping[str, str] | None = None, judgements: Sequence[Judged] = ()) -> str:
    """A self-contained page (the report's style and CSP, no script). `links`: agent -> the
    relative path of that agent's own report."""
    scenarios, agents, at = _grid(cells)
    cls = {CellStatus.HELD: "v-pass", CellStatus.VIOLATED: "v-fail",
           CellStatus.INCONCLUSIVE: "v-nondeterministic", CellStatus.NOT_RUN: "v-error"}
    head = "".join(f'<th><a href="{_e(links[a])}">{_e(a)}</a></th>' if links and a in links
                   else f"<th>{_e(a)}</th>" for a in agents)
    rows = []
    for s in scenarios:
        tds = []
        for a in agents:
            c = at[s, a]
            detail = ""
            if c.first_case is not None:
                detail = (f'<br><code class="case">{_e(c.first_case)}</code>'
                          f'<br><code class="repro">{_e(c.repro)}</code>')
            elif c.reason:
                detail = f"<br>{_e(c.reason)}"
            tds.append(f'<td class="cell-{c.status.value.replace(" ", "-")}">'
                       f'<span class="badge {cls[c.status]}">{_e(_short(c))}</span>{detail}</td>')
        rows.append(f"<tr><th>{_e(s)}</th>{''.join(tds)}</tr>")
    return "\n".join([
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        "<p>The same crash matrix against each agent: a cell is held when every case held; "
        "otherwise it names the violated invariants, the first failing case and its repro command.</p>",
        f'<table id="compare"><thead><tr><th>scenario</th>{head}</tr></thead><tbody>',
        *rows, "</tbody></table>", *_judged_html(judgements), "</body></html>\n"])


def _judged_html(judgements: Sequence[Judged]) -> list[str]:
    if not judgements:
        return []
    out = ['<h2>What each agent was judged on</h2>', '<ul id="judged">']
    for j in judgements:
        first, *rest = _judged_lines(j)
        items = "".join(f"<li>{_e(line)}</li>" for line in rest)
        out.append(f"<li>{_e(first)}{f'<ul>{items}</ul>' if items else ''}</li>")
    return [*out, "</ul>"]
