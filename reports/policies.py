"""The tool policies in force per scenario, as every summary states them (read from the results)."""

from __future__ import annotations

from collections.abc import Sequence

from crashmatrix.harness.records.results import CaseResult


def policies_in_force(results: Sequence[CaseResult]) -> dict[str, str]:
    """Scenario -> `read safe · send_email idempotent, restart never`, from the first of its results
    that recorded them (every case of a scenario registers the same ones); scenarios whose results
    predate the record are left out."""
    out: dict[str, str] = {}
    for r in results:
        if r.scenario not in out and r.policies:
            out[r.scenario] = " · ".join(f"{tool} {policy}" for tool, policy in r.policies.items())
    return dict(sorted(out.items()))


def policy_lines(results: Sequence[CaseResult]) -> list[str]:
    """`scenario: tool policy · ...`, a line per scenario (none when no result recorded them)."""
    return [f"{name}: {text}" for name, text in policies_in_force(results).items()]
