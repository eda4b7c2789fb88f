"""The terminal summary: a table per scenario, then each failure with its reproduction command."""

from __future__ import annotations

from tabulate import tabulate

from crashmatrix.harness.records.results import CaseResult, Verdict, not_applicable
from crashmatrix.harness.records.run_record import Completeness
from crashmatrix.reports import cause

# The table's columns after `cases`, in order (scenario errors last: the columns before them
# read as they always did).
COLUMNS = (Verdict.PASS, Verdict.FAIL, Verdict.NONDETERMINISTIC, Verdict.ERROR, Verdict.SCENARIO_ERROR)


def summary_table(results: list[CaseResult]) -> str:
    rows: dict[str, list[int]] = {}
    for r in results:
        row = rows.setdefault(r.scenario, [0] * (1 + len(COLUMNS)))
        row[0] += 1
        row[1 + COLUMNS.index(r.verdict)] += 1
    table = [[name, *counts] for name, counts in sorted(rows.items())]
    totals = [sum(col) for col in zip(*rows.values(), strict=True)] if rows else [0] * (1 + len(COLUMNS))
    table.append(["total", *totals])
    return tabulate(table, headers=["scenario", "cases", "held", "violated", "nondet", "error",
                                    "scenario error"], tablefmt="simple")


def failures(results: list[CaseResult], limit: int = 20) -> str:
    bad = [r for r in results if not r.ok]
    if not bad:
        return ""
    lines = [f"{len(bad)} case(s) did not hold:"]
    for r in bad[:limit]:
        what = ", ".join(r.invariants) or r.verdict.value
        lines.append(f"  {r.case}  [{what}]")
        for v in r.violations[:3]:
            lines.append(f"      {v['invariant']}: {v['message']}")
        note = cause.note_shown(r)
        if note:
            lines.append(f"      {note}")
        lines.extend(f"      {line}" for line in cause.lines(r))
        lines.append(f"      reproduce: {r.repro}")
    if len(bad) > limit:
        lines.append(f"  ... and {len(bad) - limit} more (see results.jsonl)")
    return "\n".join(lines)


def unjudged(results: list[CaseResult]) -> str:
    """The invariants no case could judge: listed, so that no one reads them as held."""
    items = not_applicable(results)
    if not items:
        return ""
    return "\n".join(["not judged for this agent (never counted as held):",
                      *(f"  {inv}: {why}" for inv, why in items.items())])


def render(results: list[CaseResult], out: str | None = None,
           completeness: Completeness | None = None) -> str:
    """`completeness`: said last, where a reader of a long run's output looks first."""
    parts = [summary_table(results)]
    if unjudged(results):
        parts.append(unjudged(results))
    bad = failures(results)
    if bad:
        parts.append(bad)
    if out:
        parts.append(f"results: {out}")
    if completeness is not None and completeness.line:
        parts.append(completeness.line)
    return "\n\n".join(parts)
