"""What explore prints: the minimal failing case for a person, and the JSON summary. Pure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crashmatrix.harness.explore.build import SOURCE
from crashmatrix.harness.explore.search import SearchResult
from crashmatrix.harness.explore.trial import Finding
from crashmatrix.harness.records.violation import short


def _plural(n: int, word: str, words: str | None = None) -> str:
    return f"{n} {word if n == 1 else (words or word + 's')}"


def describe_finding(finding: Finding) -> list[str]:
    """The case in a few lines: its tool calls, its crash schedule and what broke."""
    lines = [f"minimal case: {finding.case.case_id}", *(f"  {line}" for line in finding.variant.describe())]
    lines.append(f"  {_plural(finding.crashes, 'crash', 'crashes')}"
                 + (":" if finding.crashes else " (the crash-free run already fails)"))
    for inc, step in enumerate(finding.case.schedule, 1):
        where = "the first run" if inc == 1 else "recovery"
        lines.append(f"    incarnation {inc} ({where}), event {step.n} {step.point}: {step.fault}")
    r = finding.result
    lines.append(f"  verdict: {r.verdict.value}" + (f" ({r.note})" if r.note else ""))
    for v in r.violations:
        lines.append(f"    {v['invariant']}: {short(v['message'], 200)}")
    return lines


def summary_line(result: SearchResult, who: str, seed: int) -> str:
    rate = result.cases / result.seconds if result.seconds > 0 else 0.0
    return (f"explore ({who}, seed {seed}): {_plural(result.examples, 'example')}, "
            f"{_plural(result.cases, 'case')} in {result.seconds:.1f}s ({rate:.1f} cases/s)")


def text_report(result: SearchResult, who: str, seed: int, file: Path | None,
                command: str | None) -> list[str]:
    lines = [summary_line(result, who, seed)]
    if result.finding is None:
        return [*lines, "no failure found"]
    lines.append(f"FAILED; shrunk over {result.shrink_examples} more example(s)")
    lines += describe_finding(result.finding)
    lines += [f"repro file: {file}", f"reproduce: {command}"]
    if result.finding.scenario.source != SOURCE and result.finding.result.repro:
        # A scenario of the user's own: its case id replays from their folder, as `run` prints it.
        lines.append(f"or by case id: {result.finding.result.repro}")
    return lines


def summary_json(result: SearchResult, agent: str, mutant: str | None, seed: int,
                 file: str | None, command: str | None) -> dict[str, Any]:
    found: dict[str, Any] | None = None
    if result.finding is not None:
        f = result.finding
        found = {"case": f.case.case_id, "verdict": f.result.verdict.value,
                 "invariants": f.result.invariants, "calls": f.calls, "crashes": f.crashes,
                 "file": file, "repro": command}
    return {"agent": agent, "mutant": mutant, "seed": seed, "examples": result.examples,
            "cases": result.cases, "seconds": round(result.seconds, 1),
            "shrink_examples": result.shrink_examples, "found": found}
