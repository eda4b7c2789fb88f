"""The terminal summary: a table per scenario, each failure with its reproduction command, what was proved."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Sequence
from pathlib import Path

from crashmatrix.harness.records.results import CaseResult, Verdict, not_applicable
from crashmatrix.harness.records.run_record import Completeness
from crashmatrix.reports import cause
from crashmatrix.reports.facts import BranchFacts, RunFacts
from crashmatrix.reports.groups import distinct_failures
from crashmatrix.reports.policies import policy_lines

# The table's columns after `cases`, in order (scenario errors last: the columns before them
# read as they always did).
COLUMNS = (Verdict.PASS, Verdict.FAIL, Verdict.NONDETERMINISTIC, Verdict.ERROR, Verdict.SCENARIO_ERROR)


def summary_table(results: list[CaseResult]) -> str:
    rows: dict[str, list[int]] = {}
    for r in results:
        row = rows.setdefault(r.scenario, [0] * (1 + len(COLUMNS)))
        row[0] += 1
        row[1 + COLUMNS.index(r.verdict)] += 1
    from tabulate import tabulate  # noqa: PLC0415 - deferred: 6 ms of every start; `run --json` prints no table

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


def causes(results: list[CaseResult], limit: int = 10) -> str:
    """The failing cases by root cause, a line each: what to fix, before the cases it explains."""
    found = distinct_failures(results)
    if not found:
        return ""
    lines = [f"{_count(len(found), 'distinct failure')} (one root cause each; a case is in one):"]
    lines += [f"  {_count(len(g.cases), 'case')}: {g.summary}; e.g. {g.cases[0].case}" for g in found[:limit]]
    if len(found) > limit:
        lines.append(f"  ... and {len(found) - limit} more (see report.html)")
    return "\n".join(lines)


def unjudged(results: list[CaseResult]) -> str:
    """The invariants no case could judge: listed, so that no one reads them as held."""
    items = not_applicable(results)
    if not items:
        return ""
    return "\n".join(["not judged for this agent (never counted as held):",
                      *(f"  {inv}: {why}" for inv, why in items.items())])


# The facts block fits a 100-column terminal: a label column, then text wrapped under itself.
WIDTH = 100
LABEL = 11


def _field(label: str, text: str) -> str:
    # Never split a word: an invariant id or a path broken at its hyphen would not be found again.
    return textwrap.fill(text, WIDTH, initial_indent=label.ljust(LABEL), subsequent_indent=" " * LABEL,
                         break_long_words=False, break_on_hyphens=False)


def duration(seconds: float) -> str:
    """As the README says it: `9.3 s`, `1 min 52 s`, `1 h 2 min`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _checked(facts: RunFacts) -> str:
    names = [f"{i} (in part)" if i in facts.partly else i for i in facts.invariants]
    text = f"{_count(len(facts.invariants), 'invariant')}: {', '.join(names) or 'none'}"
    if facts.never_exercised:
        text += (f"; never exercised, so not shown to hold: {', '.join(facts.never_exercised)} "
                 "(no case's situation called for them)")
    if not facts.exercise_known:
        text += " (these results do not record which invariants each case exercised)"
    if facts.unjudged:
        text += f" ({len(facts.unjudged)} not judged, listed above with why)"
    return text


def _coverage(c: BranchFacts) -> str:
    if c.unmeasured is not None:
        return f"recovery branches {c.unmeasured}"
    if not c.declared and not c.undeclared:
        return "recovery branches: the agent declares none"
    text = f"recovery branches {c.reached}/{c.declared} reached"
    if c.unreached:
        text += f"; never reached: {', '.join(c.unreached)}"
    if c.undeclared:
        text += f"; reached but not declared: {', '.join(c.undeclared)}"
    return text


def _lines(facts: RunFacts) -> str:
    """--line-coverage's total, with where to read it (the HTML sits in the output folder)."""
    if facts.lines is None:
        return ""
    of = f" of {facts.lines.source}" if facts.lines.source else ""
    return (f"; lines+branches of the agent run by recovery {facts.lines.percent}%{of} "
            f"({facts.lines.recoveries} recoveries, {facts.lines.html})")


def written(files: Sequence[Path]) -> str:
    """The first file by its path, the others relative to its folder (they all live under it)."""
    if not files:
        return "nothing"
    base = files[0].parent
    rest = [os.path.relpath(f, base) if f.is_relative_to(base) else str(f) for f in files[1:]]
    return ", ".join([str(files[0]), *rest])


def proved(facts: RunFacts) -> str:
    """What the run checked, how, how much, and where it wrote it: the block a reader quotes."""
    run = [", ".join(facts.faults) or "no crash", f"depth {facts.depth}", _count(facts.cases, "case"),
           _count(facts.distinct_failures, "distinct failure")]
    if facts.duration_s is not None:
        run.append(duration(facts.duration_s))
    return "\n".join([_field("checked", _checked(facts)), _field("faults", " · ".join(run)),
                      _field("coverage", _coverage(facts.coverage) + _lines(facts)),
                      _field("wrote", written(facts.files))])


def render(results: list[CaseResult], out: str | None = None,
           completeness: Completeness | None = None, facts: RunFacts | None = None) -> str:
    """`completeness`: said last, where a reader of a long run's output looks first. `facts`:
    what was proved, after the failures (it names the results file, so `out` is then not said)."""
    parts = [summary_table(results)]
    policies = policy_lines(results)
    if policies:
        parts.append("tool policies in force:\n" + "\n".join(f"  {line}" for line in policies))
    if unjudged(results):
        parts.append(unjudged(results))
    bad = failures(results)
    if bad:
        parts += [bad, causes(results)]
    if facts is not None:
        parts.append(proved(facts))
    elif out:
        parts.append(f"results: {out}")
    if completeness is not None and completeness.line:
        parts.append(completeness.line)
    return "\n\n".join(parts)
