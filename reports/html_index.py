"""The top of the report: the per-scenario index, and recovery-branch coverage (its summary and table)."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.run_record import LineCoverageRecord, StatesRecord
from crashmatrix.reports.coverage import NO_BRANCHES, branch_coverage
from crashmatrix.reports.facts import branch_facts, scenario_states, settles_reused
from crashmatrix.reports.groups import FailureGroup
from crashmatrix.reports.html_base import e
from crashmatrix.reports.html_grid import scenario_anchor
from crashmatrix.reports.html_groups import scenarios_of
from crashmatrix.reports.policies import policy_lines


def index(results: Sequence[CaseResult], found: Sequence[FailureGroup]) -> list[str]:
    """A row per scenario: cases, held, violated, other verdicts, distinct failures; the name links
    to the scenario's grid."""
    names = sorted({r.scenario for r in results})
    out = ['<table id="index"><thead><tr><th>scenario</th><th>cases</th><th>held</th><th>violated</th>'
           "<th>other (?, !, S)</th><th>distinct failures</th></tr></thead><tbody>"]
    for name in names:
        mine = [r for r in results if r.scenario == name]
        held = sum(1 for r in mine if r.ok)
        violated = sum(1 for r in mine if r.verdict is Verdict.FAIL)
        other = len(mine) - held - violated
        distinct = sum(1 for g in found if name in scenarios_of(g))
        cls = "v-pass" if held == len(mine) else "v-fail" if violated else "v-nondeterministic"
        out.append(f'<tr class="{cls}" data-scenario="{e(name)}" data-cases="{len(mine)}" '
                   f'data-held="{held}" data-violated="{violated}" data-other="{other}" '
                   f'data-distinct="{distinct}"><td><a href="#{scenario_anchor(name)}"><code>{e(name)}'
                   f'</code></a></td><td class="n">{len(mine)}</td><td class="n">{held}</td>'
                   f'<td class="n">{violated}</td><td class="n">{other}</td>'
                   f'<td class="n">{distinct}</td></tr>')
    out.append("</tbody></table>")
    policies = policy_lines(results)
    if policies:
        out.append('<p id="policies">Tool policies in force: '
                   + "; ".join(f"<code>{e(line)}</code>" for line in policies) + "</p>")
    return out


def coverage_summary(results: Sequence[CaseResult], declared: Sequence[str]) -> list[str]:
    """One line near the top: how many declared branches were reached, which never were."""
    c = branch_facts(results, declared)
    if c.unmeasured is not None:
        return [f'<p id="coverage-summary">Recovery branches {e(c.unmeasured)}.</p>']
    if not c.declared and not c.undeclared:
        return [f'<p id="coverage-summary">{e(NO_BRANCHES)}</p>']
    text = f"Recovery branches: {c.reached} of {c.declared} declared reached"
    if c.unreached:
        text += "; <b>never reached</b>: " + ", ".join(f"<code>{e(b)}</code>" for b in c.unreached)
    if c.undeclared:
        text += "; reached but not declared: " + ", ".join(f"<code>{e(b)}</code>" for b in c.undeclared)
    cls = "s-unreached" if c.unreached or c.undeclared else "s-reached"
    return [f'<p id="coverage-summary" class="{cls}">{text}. <a href="#coverage">The full table</a>.</p>']


def coverage_table(results: Sequence[CaseResult], declared: Sequence[str]) -> list[str]:
    if not branch_coverage(results, declared):
        return [f"<p>{e(NO_BRANCHES)}</p>"]
    out = ['<table id="coverage"><thead><tr><th>recovery branch</th><th>status</th><th>cases</th>'
           "<th>example case</th></tr></thead><tbody>"]
    for c in branch_coverage(results, declared):
        out.append(f'<tr class="s-{c.status.value}"><td><code>{e(c.branch)}</code></td>'
                   f'<td>{c.status.value}</td><td class="n">{c.cases}</td>'
                   f"<td><code>{e(c.example_case or '—')}</code></td></tr>")
    out.append("</tbody></table>")
    return out


def line_coverage(record: LineCoverageRecord | None) -> list[str]:
    """run.json's `line_coverage` (what `run --line-coverage` measured): its total, and a link to
    coverage.py's pages beside the report. Nothing when the run did not measure it."""
    if record is None:
        return []
    percent = record.percent if isinstance(record.percent, int | float) else None
    text = ("Line and branch coverage of the agent in recovery incarnations: "
            + (f"{percent:.1f}%" if percent is not None else e(record.percent))
            + (f" of <code>{e(record.source)}</code>" if record.source else ""))
    # Only a relative path is linked (the caller makes run.json's relative to the report's
    # folder): the page must name nothing on the network or elsewhere on the machine.
    if record.html and ":" not in record.html and not record.html.startswith("/"):
        href = quote(record.html, safe="/._-~")
        text += f' (<a href="{e(href)}">{e(record.html)}</a>)'
    return [f'<p id="line-coverage">{text}, from {e(record.recoveries)} recoveries.</p>']


def crash_states(record: StatesRecord | None) -> list[str]:
    """run.json's `crash_states` (what `run --states` shared): per scenario, how many crash points
    mapped to how many states, and the settle runs reused. Nothing without --states."""
    if record is None:
        return []
    rows = [f"<li><code>{e(name)}</code>: {e(scenario_states(s))}</li>"
            for name, s in sorted(record.scenarios.items())]
    return ['<div id="crash-states"><p>Crash states (<code>--states</code>):</p><ul>',
            *(rows or ["<li>no case started from a crash state</li>"]),
            f"<li>{e(settles_reused(record))}</li>", "</ul></div>"]
