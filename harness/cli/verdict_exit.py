"""How a matrix command's results become its exit code: violations, scenario errors, a matrix
that crashed nothing, and known failures (a baseline)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.uncrashed import uncrashed

if TYPE_CHECKING:
    from crashmatrix.harness.records.baseline import Baseline


def verdict_exit(results: list[CaseResult], coverage_missing: bool = False) -> Exit:
    """1 when a case violated an invariant or was nondeterministic (or, where the caller has not
    exited 3 for it, in error); else 2 (bad input) when a case is a scenario error, which says so
    on stderr; else 1 for missing coverage; else 0."""
    if any(not r.ok and r.verdict is not Verdict.SCENARIO_ERROR for r in results):
        return Exit.VIOLATIONS
    wrong = [r for r in results if r.verdict is Verdict.SCENARIO_ERROR]
    if wrong:
        names = ", ".join(sorted({r.scenario for r in wrong}))
        click.echo(f"crashmatrix: error: {len(wrong)} case(s) are scenario errors ({names}): the "
                   "scenario is wrong, not the agent; fix it as each cause says, then run again",
                   err=True)
        return Exit.USAGE
    return Exit.VIOLATIONS if coverage_missing else Exit.HELD


def baseline_of(path: str | None) -> Baseline | None:
    """The --baseline file's known failures (None without one); a bad file ends the command (2)."""
    if path is None:
        return None
    # deferred: records/baseline is ~1 ms of every start; only --baseline reads one
    from crashmatrix.harness.records.baseline import BaselineError  # noqa: PLC0415
    from crashmatrix.harness.records.baseline import read as read_baseline  # noqa: PLC0415

    try:
        return read_baseline(Path(path))
    except BaselineError as exc:
        fail(f"--baseline: {exc}")


def verdict_against(results: list[CaseResult], known: Baseline | None, path: str | None,
             coverage_missing: bool = False) -> Exit:
    """The exit code, against the baseline when there is one: only new failures, and listed cases
    that now hold, fail the run."""
    if known is None or path is None:
        return verdict_exit(results, coverage_missing)
    from crashmatrix.harness.records.baseline import judge as judge_baseline  # noqa: PLC0415 - deferred, as above
    from crashmatrix.harness.records.baseline import lines as baseline_lines  # noqa: PLC0415

    judged = judge_baseline(results, known)
    for line in baseline_lines(judged, Path(path)):
        click.echo(f"crashmatrix: {line}", err=True)
    return verdict_exit(judged.new, coverage_missing or bool(judged.fixed))


def refuse_uncrashed(results: list[CaseResult]) -> None:
    """Exit 3 when a scenario's matrix crashed nothing (issue 33, O1): saying why for each."""
    idle = uncrashed(results)
    for name, why in idle.items():
        click.echo(f"crashmatrix: error: scenario {name}: no case crashed anything: {why}, so "
                   "nothing about recovery was tested", err=True)
    if idle:
        sys.exit(int(Exit.HARNESS))
