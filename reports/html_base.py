"""What every part of the HTML report shares: escaping, clipping, verdict words, marks and order."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from crashmatrix.harness.records.results import Verdict

MAX_TEXT = 2000  # characters of one violation message or evidence dump

# Worst first: a cell or group takes the colour of its worst case.
SEVERITY = (Verdict.FAIL, Verdict.ERROR, Verdict.SCENARIO_ERROR, Verdict.NONDETERMINISTIC, Verdict.PASS)
MARK = {Verdict.PASS: "✓", Verdict.FAIL: "✗", Verdict.NONDETERMINISTIC: "?", Verdict.ERROR: "!",
        Verdict.SCENARIO_ERROR: "S"}
WORD = {Verdict.PASS: "held", Verdict.FAIL: "violated", Verdict.NONDETERMINISTIC: "nondeterministic",
        Verdict.ERROR: "harness error", Verdict.SCENARIO_ERROR: "scenario error"}


def e(value: object) -> str:
    return escape(str(value), quote=True)


def clip(text: object, limit: int = MAX_TEXT) -> str:
    s = str(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    return min(verdicts, key=SEVERITY.index)


def badge(verdict: Verdict) -> str:
    return f'<span class="badge v-{verdict.value}">{WORD[verdict]}</span>'
