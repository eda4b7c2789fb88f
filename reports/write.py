"""Writing the report files: render everything first, then replace each file atomically."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from crashmatrix.harness.records.results import CaseResult
from crashmatrix.harness.records.run_record import Completeness, LineCoverageRecord, StatesRecord
from crashmatrix.reports.groups import steps_of
from crashmatrix.reports.header import Header

REPORT_MODE = 0o644


class ReportFile(StrEnum):
    SUMMARY = "summary.md"
    JUNIT = "junit.xml"
    HTML = "report.html"


def _order(r: CaseResult) -> tuple[str, int, tuple[tuple[int, str, str, str], ...], str]:
    # Cases finish in any order under --jobs, and merged shards are sorted differently again; a
    # total order on what the case *is* makes `run` and `report` write byte-identical files.
    schedule = steps_of(r.case)
    steps = (((1 << 30, "", "", ""),) if schedule is None
             else tuple((s.n, s.kind, s.label, s.fault) for s in schedule))
    return (r.scenario, len(steps), steps, r.case)


def canonical(results: Sequence[CaseResult]) -> list[CaseResult]:
    return sorted(results, key=_order)


def render_all(results: Sequence[CaseResult], declared: Sequence[str],
               completeness: Completeness | None = None,
               lines: LineCoverageRecord | None = None,
               states: StatesRecord | None = None,
               notes: Sequence[str] = (), header: Header | None = None) -> dict[ReportFile, str]:
    # deferred: the renderers (and xml.etree) are ~10 ms of every start; a `run` refused (exit 2)
    # before it has results, or `run --help`, renders none
    from crashmatrix.reports import html, junit, markdown  # noqa: PLC0415

    ordered = canonical(results)
    return {ReportFile.SUMMARY: markdown.render(ordered, declared, completeness, lines, states=states,
                                                notes=notes, header=header),
            ReportFile.JUNIT: junit.render(ordered, notes, header),
            ReportFile.HTML: html.render(ordered, declared, completeness, lines, states, notes, header)}


def _stage(out_dir: Path, name: str, text: str) -> Path:
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            # mkstemp makes the file 0600; reports are for anyone who can read the results.
            os.fchmod(f.fileno(), REPORT_MODE)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def relative_to_reports(lines: LineCoverageRecord | None, results_dir: Path | None,
                        out_dir: Path) -> LineCoverageRecord | None:
    """`lines` with its HTML path (relative to run.json's folder, `results_dir`) made relative to
    the folder the reports are written to: `report RESULTS --out OTHER` links from OTHER."""
    if lines is None or not lines.html or results_dir is None or Path(lines.html).is_absolute():
        return lines
    target = os.path.relpath(os.path.abspath(results_dir / lines.html), os.path.abspath(out_dir))
    return dataclasses.replace(lines, html=Path(target).as_posix())


def write_reports(results: Sequence[CaseResult], out_dir: Path, declared: Sequence[str],
                  step_summary_path: Path | str | None = None,
                  completeness: Completeness | None = None,
                  lines: LineCoverageRecord | None = None,
                  results_dir: Path | None = None,
                  states: StatesRecord | None = None,
                  notes: Sequence[str] = (), header: Header | None = None) -> list[Path]:
    """Write summary.md, junit.xml and report.html into out_dir; return their paths.

    Every file is rendered and staged beside its target before any target is replaced, so a
    failure (in a renderer, or a full disk) leaves the previous reports as they were. The Markdown
    is also appended to step_summary_path ($GITHUB_STEP_SUMMARY, which GitHub expects appended to).
    `completeness` (judged from run.json by the caller) and `lines` (run.json's `line_coverage`)
    are shown in summary.md and report.html, and so is `states` (run.json's `crash_states`); all
    come from run.json, so `report` rewrites the bytes `run` wrote. `results_dir`: the folder
    run.json is in, when not `out_dir` (the link to the line coverage is made relative to
    `out_dir`). The step summary's copy names that path
    instead of linking it: the job page is not beside the files. `notes`: what the run could not
    promise (run_record.run_notes), said at the top of each file; `header`: the agent and what was
    judged (reports/header.py), which each file opens with.
    """
    lines = relative_to_reports(lines, results_dir, out_dir)
    rendered = render_all(results, declared, completeness, lines, states, notes, header)
    out_dir.mkdir(parents=True, exist_ok=True)
    staged: dict[Path, Path] = {}
    try:
        for name, text in rendered.items():
            staged[out_dir / name.value] = _stage(out_dir, name.value, text)
        for target, tmp in staged.items():
            os.replace(tmp, target)
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)  # only left over when something above failed
    if step_summary_path:
        from crashmatrix.reports import markdown  # noqa: PLC0415 - deferred, as in render_all

        with open(step_summary_path, "a", encoding="utf-8", newline="\n") as f:
            f.write(markdown.render(canonical(results), declared, completeness, lines, linked=False,
                                    states=states, notes=notes, header=header))
    return list(staged)
