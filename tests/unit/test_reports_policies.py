"""Every summary states the tool policies in force, per scenario, from what the results recorded."""

from __future__ import annotations

import dataclasses

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import Verdict
from crashmatrix.reports import html, markdown, terminal
from crashmatrix.reports.policies import policy_lines
from tests.unit.test_reports_data import DECLARED, make

POLICIES = {"lookup_order": "read-only", "send_email": "idempotent, restart never"}


def _results() -> list:  # type: ignore[type-arg]
    support = dataclasses.replace(make(Case("support"), Verdict.PASS), policies=POLICIES)
    older = make(Case("older"), Verdict.PASS)  # a record from before policies were kept
    return [support, older]


def test_policies_are_stated_per_scenario_in_every_summary() -> None:
    results = _results()
    line = "support: lookup_order read-only · send_email idempotent, restart never"
    assert policy_lines(results) == [line]
    assert f"tool policies in force:\n  {line}" in terminal.render(results)
    assert f"- {line}" in markdown.render(results, DECLARED)
    assert f'<p id="policies">Tool policies in force: <code>{line}</code></p>' in html.render(
        results, DECLARED)


def test_no_summary_claims_policies_no_result_recorded() -> None:
    results = [r for r in _results() if r.policies is None]
    assert policy_lines(results) == []
    assert "policies" not in terminal.render(results)
    assert "Tool policies" not in markdown.render(results, DECLARED)
