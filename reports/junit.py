"""JUnit XML: one testsuite per scenario, one testcase per case, failures carrying the repro command."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from crashmatrix.harness.records.results import CaseResult, Verdict, not_applicable
from crashmatrix.reports import cause
from crashmatrix.reports.fixes import doc_link, fix_of
from crashmatrix.reports.header import Header

# JUnit errors, not failures: the test could not be judged (the harness failed, the case was not
# the recorded one, or the scenario is wrong), which says nothing against the agent.
ERRORS = (Verdict.NONDETERMINISTIC, Verdict.ERROR, Verdict.SCENARIO_ERROR)

# XML 1.0 cannot carry most control characters, even escaped; ElementTree would write them
# verbatim and the file would no longer parse. Agent output can hold anything, so replace them.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
MAX_EVIDENCE = 2000  # characters of one violation's evidence in the failure text


def _xml_text(value: object) -> str:
    return _INVALID_XML.sub("\ufffd", str(value))


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.3f}"


def _evidence(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= MAX_EVIDENCE else text[: MAX_EVIDENCE - 1] + "…"


def failure_text(r: CaseResult) -> str:
    """Every violation (invariant id, message, evidence), the note or the scenario error's cause,
    then the reproduction command."""
    lines = []
    for v in r.violations:
        lines.append(f"{v.get('invariant', '?')}: {v.get('message', '')}")
        if v.get("evidence"):
            lines.append(f"  evidence: {_evidence(v['evidence'])}")
    note = cause.note_shown(r)
    if note:
        lines.append(f"note: {note}")
    lines += cause.lines(r)
    for inv in dict.fromkeys(r.invariants):
        hint = fix_of(inv)
        if hint:
            lines.append(f"how agents usually fix {inv}: {hint} ({doc_link(inv)})")
    lines.append(f"reproduce: {r.repro}")
    return "\n".join(lines)


def _testcase(parent: ET.Element, r: CaseResult) -> None:
    case = ET.SubElement(parent, "testcase", {
        "name": _xml_text(r.case), "classname": _xml_text(f"crashmatrix.{r.scenario}"),
        "time": _seconds(r.duration_ms)})
    if r.verdict is Verdict.FAIL:
        # A fail verdict always has violations; the fallback keeps the attributes non-empty anyway.
        ids = r.invariants or [r.verdict.value]
        element = ET.SubElement(case, "failure", {"message": _xml_text(", ".join(ids)),
                                                  "type": _xml_text(ids[0])})
        element.text = _xml_text(failure_text(r))
    elif r.verdict in ERRORS:
        message = f"{r.verdict.value}: {r.note}" if r.note else r.verdict.value
        if r.scenario_error:
            message = f"{cause.title(r)}: {cause.headline(r.scenario_error)}"
        element = ET.SubElement(case, "error", {"message": _xml_text(message), "type": r.verdict.value})
        element.text = _xml_text(failure_text(r))


def _totals(results: Sequence[CaseResult]) -> dict[str, str]:
    return {"tests": str(len(results)),
            "failures": str(sum(1 for r in results if r.verdict is Verdict.FAIL)),
            "errors": str(sum(1 for r in results if r.verdict in ERRORS)),
            "skipped": "0",
            "time": _seconds(sum(r.duration_ms for r in results))}


def render(results: Sequence[CaseResult], notes: Sequence[str] = (), header: Header | None = None) -> str:
    """The JUnit document (UTF-8 text with its declaration); suites sorted by scenario name.
    `notes`: what the run could not promise, a property of every suite (CI tools show those)."""
    root = ET.Element("testsuites", {"name": "crashmatrix", **_totals(results)})
    by_scenario: dict[str, list[CaseResult]] = {}
    for r in results:
        by_scenario.setdefault(r.scenario, []).append(r)
    for name, rows in sorted(by_scenario.items()):
        suite = ET.SubElement(root, "testsuite", {"name": _xml_text(name), **_totals(rows)})
        na = not_applicable(rows)
        if na or notes or header is not None:
            # Not judged is not held: CI tools show suite properties next to the counts.
            props = ET.SubElement(suite, "properties")
            for label, text in header.fields() if header is not None else []:
                ET.SubElement(props, "property", {"name": f"crashmatrix:{label.replace(' ', '-')}",
                                                  "value": _xml_text(text)})
            for note in notes:
                ET.SubElement(props, "property", {"name": "crashmatrix:note", "value": _xml_text(note)})
            for inv, why in na.items():
                ET.SubElement(props, "property", {"name": f"not-applicable:{inv}", "value": _xml_text(why)})
        for r in rows:
            _testcase(suite, r)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
