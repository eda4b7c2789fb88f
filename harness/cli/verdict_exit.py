"""How a matrix command's results become its exit code."""

from __future__ import annotations

import click

from crashmatrix.harness.cli.exitcodes import Exit
from crashmatrix.harness.records.results import CaseResult, Verdict


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
