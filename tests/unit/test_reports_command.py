"""`crashmatrix report` and write_reports: atomic files, identical regeneration, exit codes."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from crashmatrix.agent.recovery import DECLARED_BRANCHES
from crashmatrix.harness.cli.exitcodes import Exit
from crashmatrix.harness.cli.report import coverage_failures, report
from crashmatrix.harness.records.results import RESULTS_FILE, CaseResult, ResultsWriter, merge
from crashmatrix.harness.records.run_record import RunRecord, judge
from crashmatrix.harness.verify import CHECKS
from crashmatrix.reports import html
from crashmatrix.reports.header import header
from crashmatrix.reports.write import ReportFile, write_reports
from tests.unit.test_reports_data import DECLARED, sample_results

NAMES = [f.value for f in ReportFile]


def save(results: list[CaseResult], out: Path, run: dict[str, object] | None = None) -> Path:
    writer = ResultsWriter(out / RESULTS_FILE)
    for r in results:
        writer.write(r)
    writer.close()
    if run is not None:
        (out / "run.json").write_text(json.dumps(run), encoding="utf-8")
    return out / RESULTS_FILE


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(report, list(args), env={"GITHUB_STEP_SUMMARY": "", **(env or {})})


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def finished_run(results: list[CaseResult]) -> dict[str, object]:
    """The run.json `run` writes when its matrix ran to the end."""
    expected = dict(Counter(r.scenario for r in results))
    return {"format": 2, "agent": "durable-agent", "declared_branches": list(DECLARED), "depth": 2,
            "fsync": False, "timeout": 60.0, "spawn": "fork", "scenarios": sorted(expected), "shard": None,
            "expected": expected, "expected_total": len(results), "known": len(results),
            "done": len(results), "complete": True, "ended": "finished"}


def test_report_regenerates_identical_bytes_whatever_the_result_order(tmp_path: Path) -> None:
    results = sample_results()
    run = finished_run(results)
    # What `run` writes, in finish order, with the completeness it judged from its run.json.
    record = RunRecord.from_json(run, tmp_path / "run.json")
    completeness = judge(record, results)
    written = write_reports(results, tmp_path / "run", DECLARED, completeness=completeness,
                            header=header(results, list(CHECKS), record))
    assert [p.name for p in written] == NAMES
    shuffled = results[:]
    random.Random(7).shuffle(shuffled)
    save(shuffled, tmp_path / "saved", run)
    first = invoke(str(tmp_path / "saved"))
    assert first.exit_code == 0, first.output
    assert first.output.splitlines() == [f"wrote {tmp_path / 'saved' / name}" for name in NAMES]
    once = snapshot(tmp_path / "saved")
    assert invoke(str(tmp_path / "saved" / RESULTS_FILE)).exit_code == 0
    assert snapshot(tmp_path / "saved") == once
    assert {n: once[n] for n in NAMES} == {n: (tmp_path / "run" / n).read_bytes() for n in NAMES}
    assert sorted(once) == sorted([RESULTS_FILE, "run.json", *NAMES])  # no temp files left


def test_report_works_on_merged_shards_and_writes_where_asked(tmp_path: Path) -> None:
    results = sample_results()
    merged = merge([results[::2], results[1::2]])
    save(merged, tmp_path / "merged")
    got = invoke(str(tmp_path / "merged"), "--out", str(tmp_path / "elsewhere"))
    assert got.exit_code == 0, got.output
    # No run.json: the adapter's branch list, and completeness unknown (said in the reports too).
    write_reports(results, tmp_path / "direct", DECLARED_BRANCHES, completeness=judge(None, results),
                  header=header(results, list(CHECKS), None))
    assert snapshot(tmp_path / "elsewhere") == snapshot(tmp_path / "direct")


def good_reports(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    out = tmp_path / "out"
    save(sample_results(), out)
    assert invoke(str(out)).exit_code == 0
    return out, snapshot(out)


@pytest.mark.parametrize(("content", "expected"), [
    (None, "no such results file"),
    ("", "holds no case results"),
    ("\n  \n", "holds no case results"),
    # A cut line with lines after it is damage (a last line without its newline is a write a
    # stopped run tore: no result, read past; tests/unit/test_results_full_disk.py).
    ('{"case": "a/none", "scenario": "a", "depth": 0, "verdict": "pass"}\n\n{"case": "b/n\n',
     "line 3: not a case result"),
    ('{"case": "a/none", "scenario": "a", "depth": 0, "verdict": "maybe"}\n', "line 1: not a case result"),
    ('\n[1, 2]\n', "line 2: not a case result"),
    ('{"case": "a/none", "scenario": "a", "depth": 0, "verdict": "pass", "trace": "x"}\n',
     "line 1: not a case result (trace must hold"),
    (b'{"case": "a/none", "scenario": "a", "depth": 0, "verdict": "pass"}\n\xff\xfe\n', "line 2: not a case"),
    # Issue 33, M2: fields a renderer reads, hand-edited; and a case counted twice.
    ('{"case": "a/none", "scenario": "a", "depth": 0, "verdict": "pass", "agent": 7}\n',
     "line 1: not a case result (agent must be a string)"),
    ('{"case": "a/none", "scenario": "a", "depth": 0, "verdict": "pass", "not_applicable": ["x"]}\n',
     "line 1: not a case result (not_applicable must be a list of objects"),
    ('{"case": "a/none", "scenario": "a", "depth": 0, "verdict": "pass"}\n'
     '{"case": "a/none", "scenario": "a", "depth": 0, "verdict": "pass"}\n',
     "line 2: case a/none again (line 1"),
])
def test_a_missing_empty_or_damaged_file_exits_2_and_leaves_good_reports(
        tmp_path: Path, content: str | bytes | None, expected: str) -> None:
    out, before = good_reports(tmp_path)
    path = out / RESULTS_FILE
    if content is None:
        path.unlink()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    after_damage = snapshot(out)
    got = invoke(str(out))
    assert got.exit_code == Exit.USAGE
    assert f"crashmatrix: error: {path}: " in got.output
    assert expected in got.output
    assert snapshot(out) == after_damage
    assert {n: after_damage[n] for n in NAMES} == {n: before[n] for n in NAMES}


def test_a_damaged_run_description_exits_2_naming_it(tmp_path: Path) -> None:
    out, _ = good_reports(tmp_path)
    (out / "run.json").write_text('{"declared_branches": "all"}', encoding="utf-8")
    got = invoke(str(out))
    assert got.exit_code == Exit.USAGE
    assert f"{out / 'run.json'}: declared_branches must be a list of strings" in got.output


def test_a_failing_renderer_leaves_the_previous_reports_untouched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, before = good_reports(tmp_path)

    def broken(*args: object) -> str:
        raise RuntimeError("renderer bug")

    monkeypatch.setattr(html, "render", broken)
    with pytest.raises(RuntimeError, match="renderer bug"):
        write_reports(sample_results()[:3], out, DECLARED)
    assert snapshot(out) == before


def test_a_failing_write_leaves_no_half_report_and_no_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out, before = good_reports(tmp_path)
    real_replace = os.replace

    def replace_then_fail(src: str, dst: str) -> None:
        if str(dst).endswith(ReportFile.HTML.value):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace_then_fail)
    with pytest.raises(OSError, match="No space"):
        write_reports(sample_results()[:3], out, DECLARED)
    assert sorted(snapshot(out)) == sorted(before)  # nothing half-written, no .tmp left behind
    assert snapshot(out)[ReportFile.HTML.value] == before[ReportFile.HTML.value]


def test_require_coverage_fails_naming_the_unreached_branch(tmp_path: Path) -> None:
    results = sample_results()
    declared = [*DECLARED[:3], "call.rerun_safe"]
    run = {"agent": "durable-agent", "declared_branches": declared, "depth": 2, "scenarios": []}
    save(results, tmp_path / "all", run)
    assert invoke(str(tmp_path / "all"), "--require-coverage").exit_code == 1
    assert coverage_failures(results, declared) == ["call.rerun_safe"]
    save(results, tmp_path / "all", {**run, "declared_branches": list(DECLARED[:3])})
    assert invoke(str(tmp_path / "all"), "--require-coverage").exit_code == 0
    # Remove the scenarios whose crashes reach recovery: only the settle runs' branch is left.
    crash_free = [r for r in results if r.depth == 0]
    save(crash_free, tmp_path / "some", {**run, "declared_branches": list(DECLARED[:3])})
    got = invoke(str(tmp_path / "some"), "--require-coverage")
    assert got.exit_code == Exit.VIOLATIONS
    assert ("--require-coverage: 2 declared recovery branch(es) never reached: "
            "call.unknown_recorded_never, continue.after_tool_result") in got.output
    assert (tmp_path / "some" / ReportFile.HTML.value).exists()  # the reports are still written
    assert invoke(str(tmp_path / "some")).exit_code == 0  # without the flag, unreached is reported only


def test_the_summary_is_appended_to_the_github_step_summary(tmp_path: Path) -> None:
    save(sample_results(), tmp_path)
    step = tmp_path / "step.md"
    step.write_text("earlier step output\n", encoding="utf-8")
    assert invoke(str(tmp_path), env={"GITHUB_STEP_SUMMARY": str(step)}).exit_code == 0
    summary = (tmp_path / ReportFile.SUMMARY.value).read_text(encoding="utf-8")
    assert step.read_text(encoding="utf-8") == "earlier step output\n" + summary


def interrupted_run(results: list[CaseResult], done: int) -> dict[str, object]:
    """The run.json `run` writes when SIGINT stopped it after `done` results."""
    return {**finished_run(results), "expected": None, "expected_total": None, "done": done,
            "complete": False, "ended": "interrupted"}


def test_report_on_an_incomplete_set_exits_3_and_says_so_in_every_report(tmp_path: Path) -> None:
    results = sample_results()
    out = tmp_path / "out"
    save(results[:3], out, interrupted_run(results, 3))
    got = invoke(str(out), "--require-coverage")
    line = f"INCOMPLETE: 3 of at least {len(results)} cases have results (the run was interrupted)"
    assert got.exit_code == Exit.HARNESS, got.output  # before the coverage verdict: partial proves nothing
    hint = f"; continue it with `crashmatrix run --resume --out {out}`"
    assert f"crashmatrix: error: {line}{hint}" in got.output
    assert f"**{line}**" in (out / ReportFile.SUMMARY.value).read_text(encoding="utf-8")
    assert f'class="c-incomplete">{line}</p>' in (out / ReportFile.HTML.value).read_text(encoding="utf-8")


def test_report_finds_lines_lost_from_a_finished_run(tmp_path: Path) -> None:
    results = sample_results()
    save(results[:-1], tmp_path, finished_run(results))  # the last line lost after the run ended
    got = invoke(str(tmp_path))
    assert got.exit_code == Exit.HARNESS
    assert "results.jsonl holds fewer results than run.json expects (tool-stop: 4 of 5)" in got.output
    save(results, tmp_path, finished_run(results))
    assert invoke(str(tmp_path)).exit_code == 0


def test_an_older_run_json_still_reports_and_says_completeness_is_unknown(tmp_path: Path) -> None:
    old = {"agent": "durable-agent", "declared_branches": list(DECLARED), "depth": 2, "fsync": False,
           "spawn": "fork", "scenarios": ["changelog", "tool-stop"], "shard": None}
    save(sample_results(), tmp_path, old)
    got = invoke(str(tmp_path))
    assert got.exit_code == 0, got.output
    note = (f"completeness unknown: {len(sample_results())} cases have results; run.json records no "
            "expected case count (written by an older crashmatrix)")
    assert f"crashmatrix: note: {note}" in got.output
    assert f"**{note}**" in (tmp_path / ReportFile.SUMMARY.value).read_text(encoding="utf-8")


def test_a_damaged_completeness_field_exits_2_naming_it(tmp_path: Path) -> None:
    out, before = good_reports(tmp_path)
    (out / "run.json").write_text(json.dumps({**finished_run(sample_results()), "done": "all"}))
    got = invoke(str(out))
    assert got.exit_code == Exit.USAGE
    assert f"crashmatrix: error: {out / 'run.json'}: done must be a count" in got.output
    assert {n: (out / n).read_bytes() for n in NAMES} == {n: before[n] for n in NAMES}
