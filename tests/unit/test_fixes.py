"""Each invariant's "how agents usually fix it" (reports/fixes.py) is the same text as its section
in docs/invariants.md, and the reports show it beside what was violated."""

from __future__ import annotations

import re
from pathlib import Path

from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.violation import InvariantId
from crashmatrix.reports import html, junit, markdown
from crashmatrix.reports.fixes import FIXES, doc_link

DOC = Path(__file__).resolve().parents[2] / "docs" / "invariants.md"


def _sections() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    parts = re.split(r"^## (\S+)\n", text, flags=re.MULTILINE)
    return {parts[k]: " ".join(parts[k + 1].split()) for k in range(1, len(parts) - 1, 2)}


def test_every_invariant_has_its_fix_in_the_docs_in_the_same_words() -> None:
    sections = _sections()
    assert set(FIXES) == set(InvariantId)
    for inv, text in FIXES.items():
        assert f"**How agents usually fix it.** {text}" in sections[inv.value], inv.value


def test_the_reports_show_the_fix_of_each_violated_invariant_and_only_those() -> None:
    bad = CaseResult(case="s/01:commit.after:m/kill", scenario="s", depth=1, verdict=Verdict.FAIL,
                     violations=[{"invariant": "at-most-once", "message": "ran twice"}],
                     repro="crashmatrix repro s/01:commit.after:m/kill")
    results = [CaseResult(case="s/none", scenario="s", depth=0, verdict=Verdict.PASS, repro="r"), bad]
    hint = FIXES[InvariantId.AT_MOST_ONCE]
    summary = markdown.render(results, [])
    assert f"- `at-most-once`: {hint} ({doc_link('at-most-once')})" in summary
    assert FIXES[InvariantId.PAIRING] not in summary
    assert hint.replace("'", "&#x27;") in html.render(results, [])
    xml = junit.render(results)
    assert f"how agents usually fix at-most-once: {hint.replace(chr(39), '&apos;')}" in xml or \
        f"how agents usually fix at-most-once: {hint}" in xml
    held = markdown.render(results[:1], [])
    assert "How agents usually fix" not in held
