"""The Markdown summary for a CI job page ($GITHUB_STEP_SUMMARY): totals, failures, coverage."""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import quote

from crashmatrix.harness.records.clip import clip
from crashmatrix.harness.records.output_tail import last_lines
from crashmatrix.harness.records.results import CaseResult, Verdict, not_applicable
from crashmatrix.harness.records.run_record import Completeness, LineCoverageRecord, StatesRecord
from crashmatrix.reports import cause
from crashmatrix.reports.agent_output import Tail, telling
from crashmatrix.reports.coverage import NO_BRANCHES, BranchStatus, branch_coverage
from crashmatrix.reports.facts import branch_facts, scenario_states, settles_reused
from crashmatrix.reports.fixes import doc_link, violated_fixes
from crashmatrix.reports.groups import FailureGroup, distinct_failures
from crashmatrix.reports.header import Header
from crashmatrix.reports.policies import policy_lines

# GitHub refuses a step summary over 1 MiB; the failure list is cut to stay well inside it, since
# `run` and `report` may both append to the same step's summary.
MAX_BYTES = 512 * 1024
MAX_FAILURES = 200  # a CI page with more is not read case by case; the rest are counted
MAX_VIOLATIONS = 5  # per case
MAX_GROUPS = 50  # distinct failures listed by line
MAX_TEXT = 300  # characters of one message
# Of the agent's output (shown for one case per distinct failure): the last lines say why it
# stopped; the rest is in report.html and results.jsonl.
MAX_OUTPUT_LINES, MAX_OUTPUT_CHARS = 10, 1500

VERDICT_COLUMNS = (Verdict.PASS, Verdict.FAIL, Verdict.NONDETERMINISTIC, Verdict.ERROR,
                   Verdict.SCENARIO_ERROR)
VERDICT_HEADINGS = ("held", "violated", "nondet", "error", "scenario error")
STATUS_MARK = {BranchStatus.REACHED: "reached", BranchStatus.UNREACHED: "**never reached**",
               BranchStatus.UNDECLARED: "reached, **not declared**"}


def _clip(text: object, width: int = MAX_TEXT) -> str:
    # One line: a newline would end a list item or table row.
    return clip(" ".join(str(text).split()), width)


def code(text: object, width: int = MAX_TEXT) -> str:
    """An inline code span holding any text: the fence is longer than any backtick run inside."""
    s = _clip(text, width)
    if not s:
        return "` `"
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # GFM splits table cells on pipes, even inside code spans


def _counts(results: Sequence[CaseResult]) -> list[int]:
    return [len(results)] + [sum(1 for r in results if r.verdict is v) for v in VERDICT_COLUMNS]


def _scenario_table(results: Sequence[CaseResult]) -> list[str]:
    by_scenario: dict[str, list[CaseResult]] = {}
    for r in results:
        by_scenario.setdefault(r.scenario, []).append(r)
    lines = ["| scenario | cases | " + " | ".join(VERDICT_HEADINGS) + " |",
             "| --- | ---: |" + " ---: |" * len(VERDICT_HEADINGS)]
    for name, rows in sorted(by_scenario.items()):
        lines.append(f"| {_cell(code(name))} | " + " | ".join(str(n) for n in _counts(rows)) + " |")
    lines.append("| **total** | " + " | ".join(f"**{n}**" for n in _counts(results)) + " |")
    return lines


def _coverage_table(results: Sequence[CaseResult], declared: Sequence[str]) -> list[str]:
    facts = branch_facts(results, declared)
    if facts.unmeasured is not None:
        return ["## Recovery-branch coverage", "", f"Recovery branches {facts.unmeasured}."]
    rows = branch_coverage(results, declared)
    if not rows:  # an empty table says nothing: say why it is empty
        return ["## Recovery-branch coverage", "", NO_BRANCHES]
    never = len(facts.unreached)
    head = (f"{facts.reached} of {facts.declared} declared recovery branches reached"
            + (f"; **{never} never reached**." if never else "."))
    lines = ["## Recovery-branch coverage", "", head, "",
             "| branch | status | cases | example case |", "| --- | --- | ---: | --- |"]
    for c in rows:
        example = _cell(code(c.example_case)) if c.example_case else "—"
        lines.append(f"| {_cell(code(c.branch))} | {STATUS_MARK[c.status]} | {c.cases} | {example} |")
    return lines


def _failure(r: CaseResult, with_output: bool = False) -> list[str]:
    what = ", ".join(r.invariants) or str((r.scenario_error or {}).get("kind") or r.verdict.value)
    lines = [f"- {code(r.case)}: {r.verdict.value} ({_clip(what)})"]
    for v in r.violations[:MAX_VIOLATIONS]:
        lines.append(f"  - {code(v.get('invariant', '?'))}: {code(v.get('message', ''))}")
    if len(r.violations) > MAX_VIOLATIONS:
        lines.append(f"  - … {len(r.violations) - MAX_VIOLATIONS} more violation(s)")
    note = cause.note_shown(r)
    if note:
        lines.append(f"  - note: {code(note)}")
    if r.scenario_error:
        lines.append(f"  - {cause.title(r)}: {code(cause.headline(r.scenario_error))}")
        lines += [f"    - {code(d.strip())}" for d in cause.details(r.scenario_error)]
    lines.append(f"  - reproduce: {code(r.repro, 2 * MAX_TEXT)}")
    tail = telling(r) if with_output else None
    if tail is not None:
        lines += _output_block(tail)
    return lines


def _output_block(tail: Tail) -> list[str]:
    """A tail as a fenced block inside the case's list item (indented to the item's text, or
    GitHub would end the list), its fence longer than any run of backticks in it."""
    text = last_lines(tail.text, MAX_OUTPUT_LINES, MAX_OUTPUT_CHARS)
    fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    return [f"  - agent output (inc{tail.incarnation}, last lines):",
            f"    {fence}text", *(f"    {line}".rstrip() for line in text.split("\n")), f"    {fence}"]


def _with_output(found: Sequence[FailureGroup]) -> set[str]:
    """The cases whose agent output the summary shows: per distinct failure the first case (by
    id) that has any, so a CI page shows each cause's words once, not once per case."""
    chosen: set[str] = set()
    for group in found:
        first = next((r for r in group.cases if telling(r) is not None), None)
        if first is not None:
            chosen.add(first.case)
    return chosen


def _causes(found: Sequence[FailureGroup]) -> list[str]:
    """The failing cases by root cause, a line each (the first case of each named), before them."""
    lines = [f"## {len(found)} distinct failure(s)", "",
             "One root cause each: the first invariant a case broke in the verifier's order, and "
             "what it is about; a case is in one group, however many invariants it broke.", ""]
    lines += [f"- **{len(g.cases)}** case(s): {_clip(g.summary, 2 * MAX_TEXT)}; e.g. {code(g.cases[0].case)}"
              for g in found[:MAX_GROUPS]]
    if len(found) > MAX_GROUPS:
        lines.append(f"- … {len(found) - MAX_GROUPS} more, in `report.html`")
    return [*lines, ""]


def _failures(bad: Sequence[CaseResult], budget: int) -> list[str]:
    found = distinct_failures(bad)  # grouped once: the list of causes and the outputs shown
    lines = [*_causes(found), f"## {len(bad)} case(s) did not hold", ""]
    used = sum(len(line.encode()) + 1 for line in lines)
    shown = 0
    with_output = _with_output(found)
    for r in bad[:MAX_FAILURES]:
        item = _failure(r, r.case in with_output)
        size = sum(len(line.encode()) + 1 for line in item)
        if used + size > budget:
            break
        lines.extend(item)
        used += size
        shown += 1
    if shown < len(bad):
        lines += ["", f"*{len(bad) - shown} more failing case(s) left out to keep this summary small; "
                      "every one is in `junit.xml`, `report.html` and `results.jsonl`.*"]
    return lines


def _line_coverage(lines: LineCoverageRecord, linked: bool) -> str:
    of = f" of {code(lines.source)}" if lines.source else ""
    text = (f"Line and branch coverage of the agent's code in recovery incarnations: "
            f"**{_clip(lines.percent)}%**{of} ({_clip(lines.recoveries)} recoveries measured)")
    if not lines.html:
        return text + "."
    if not linked:
        # The CI job page is not beside the files: a relative link there leads nowhere.
        return text + f": {code(lines.html)} in the run's output folder."
    # The text a code span (any character); the target percent-encoded (a space or a bracket
    # would end it).
    return text + f": [{code(lines.html)}]({quote(lines.html, safe='/._-~')})"


def _crash_states(record: StatesRecord) -> list[str]:
    rows = [f"- {code(name)}: {scenario_states(s)}" for name, s in sorted(record.scenarios.items())]
    return ["## Crash states", "", *(rows or ["- no case started from a crash state"]),
            f"- {settles_reused(record)}"]


def render(results: Sequence[CaseResult], declared: Sequence[str],
           completeness: Completeness | None = None, lines: LineCoverageRecord | None = None,
           *, linked: bool = True, states: StatesRecord | None = None, notes: Sequence[str] = (),
           header: Header | None = None) -> str:
    """The whole summary; always under MAX_BYTES, whatever the number of failures. `lines`:
    run.json's line coverage, said under the branch coverage and linked (relative to the folder
    the summary is written to, so the link holds wherever that folder is read: an unpacked CI
    artifact, a laptop). `linked=False` for a copy read elsewhere ($GITHUB_STEP_SUMMARY): the
    path is named, not linked. `states`: run.json's `crash_states` (`run --states`), per
    scenario how many crash points mapped to how many states."""
    total, held, failed, nondet, error, wrong = _counts(results)
    verdict = "every case held" if held == total else f"{total - held} of {total} case(s) did not hold"
    # Above the counts: "every case held" of a partial set must not read as a green run.
    line = completeness.line if completeness is not None else None
    warning = [f"**{_clip(line)}**", ""] if line else []
    warning += [x for note in notes for x in (f"**{_clip(note)}**", "")]
    if header is not None:  # what the counts below rest on, before them
        warning += [*(f"- **{label}**: {_clip(text, 2000)}" for label, text in header.fields()), ""]
    head = ["# crashmatrix", "", *warning,
            f"**{total}** cases: {held} held, {failed} violated, {nondet} nondeterministic, "
            f"{error} harness errors, {wrong} scenario errors — {verdict}.", "",
            *(["A scenario error is the scenario's mistake, not the agent's: fix the scenario as "
               "its cause says, then run again.", ""] if wrong else []),
            *_scenario_table(results), ""]
    na = not_applicable(results)
    tail = ["", *_coverage_table(results, declared), ""]
    fixes = violated_fixes(results)
    if fixes:  # after the failures: what to do about them, linked to the invariant's section
        tail += ["## How agents usually fix what was found", "",
                 *(f"- `{inv}`: {text} ({doc_link(inv)})" for inv, text in fixes), ""]
    policies = policy_lines(results)
    if policies:
        tail += ["**Tool policies in force** (docs/scenarios.md, \"Tool policies\"):", "",
                 *(f"- {_clip(line)}" for line in policies), ""]
    if lines is not None:
        tail += [_line_coverage(lines, linked), ""]
    if states is not None:
        tail += [*_crash_states(states), ""]
    if na:
        tail += ["**Not judged** for this agent (never counted as held):", "",
                 *(f"- `{inv}`: {why}" for inv, why in na.items()), ""]
    fixed = sum(len(line.encode()) + 1 for line in head + tail)
    bad = [r for r in results if not r.ok]
    middle = _failures(bad, MAX_BYTES - fixed - 1024) if bad else []
    return "\n".join(head + middle + tail)
