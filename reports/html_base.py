"""What every part of the HTML report shares: escaping, clipping, verdict words, marks and order."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from crashmatrix.harness.records.results import Verdict

MAX_TEXT = 2000  # characters of one violation message or evidence dump (clipped by records.clip)

# Worst first: a cell or group takes the colour of its worst case.
SEVERITY = (Verdict.FAIL, Verdict.ERROR, Verdict.SCENARIO_ERROR, Verdict.NONDETERMINISTIC, Verdict.PASS)
MARK = {Verdict.PASS: "✓", Verdict.FAIL: "✗", Verdict.NONDETERMINISTIC: "?", Verdict.ERROR: "!",
        Verdict.SCENARIO_ERROR: "S"}
WORD = {Verdict.PASS: "held", Verdict.FAIL: "violated", Verdict.NONDETERMINISTIC: "nondeterministic",
        Verdict.ERROR: "harness error", Verdict.SCENARIO_ERROR: "scenario error"}


def e(value: object) -> str:
    return escape(str(value), quote=True)


def number(value: object) -> int | None:
    """A whole number from the results file, or None when it holds none: the file may come from
    anywhere (a downloaded CI artefact), and a string there must neither reach the page unescaped
    nor stop the report."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    return min(verdicts, key=SEVERITY.index)


def badge(verdict: Verdict) -> str:
    return f'<span class="badge v-{verdict.value}">{WORD[verdict]}</span>'
