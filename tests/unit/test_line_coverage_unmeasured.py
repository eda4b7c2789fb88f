"""`--line-coverage` says why it measured nothing: no recovery saved, or none of the source ran."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from crashmatrix.harness.cli.main import main
from crashmatrix.harness.execution.line_coverage import (
    IMPORTS_DATA,
    LineCoverage,
    Nothing,
    Unmeasured,
    combine_and_report,
)
from crashmatrix.harness.records.run_record import LineCoverageRecord, RunOptions, RunRecord, run_notes
from crashmatrix.reports import html_index, markdown

AGENT = '''
import os


def main(args):
    if args == ["exit-hard"]:
        os._exit(0)  # no normal exit: coverage.py never gets to save
    return 0
'''


def _project(tmp: Path) -> Path:
    """A one-module agent package, `tinypkg`, and an empty coverage-data folder beside it."""
    (tmp / "tinypkg").mkdir()
    (tmp / "tinypkg" / "__init__.py").write_text("")
    (tmp / "tinypkg" / "agent.py").write_text(AGENT)
    (tmp / "data").mkdir()
    return tmp / "data"


def _recovery(tmp: Path, data_file: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    """One recovery incarnation under coverage.py, as `--spawn fresh` runs it."""
    return subprocess.run([sys.executable, "-m", "crashmatrix.harness.execution.covered", str(data_file),
                           source, "tinypkg.agent:main", *args],
                          cwd=tmp, capture_output=True, text=True, timeout=60, check=False)


def _imports(tmp: Path, data_file: Path, source: str) -> None:
    """The zygote's import-time measurement of the agent."""
    code = ("import sys; from crashmatrix.harness.execution.covered import measure_imports; "
            "measure_imports(sys.argv[1], sys.argv[2], ['tinypkg.agent'])")
    subprocess.run([sys.executable, "-c", code, str(data_file), source], cwd=tmp, check=True, timeout=60)


def test_recoveries_that_never_saved_are_said_and_the_imports_alone_do_not_count(tmp_path: Path) -> None:
    data = _project(tmp_path)
    _imports(tmp_path, data / IMPORTS_DATA, "tinypkg")
    assert (data / IMPORTS_DATA).exists()  # the agent's import-time lines were measured
    ended = _recovery(tmp_path, data / ".coverage.c.2", "tinypkg", "exit-hard")
    assert ended.returncode == 0, ended.stderr
    assert not (data / ".coverage.c.2").exists()  # os._exit: nothing saved
    result = combine_and_report(data, tmp_path, "tinypkg")
    assert isinstance(result, Unmeasured)
    assert result.why is Nothing.SAVED
    assert "os._exit" in result.message
    assert "no recovery that ran to its end" in result.message
    assert not (tmp_path / "coverage").exists()


def test_data_of_another_source_is_said_naming_the_source_and_the_option(tmp_path: Path) -> None:
    data = _project(tmp_path)
    for index in (2, 3):
        ended = _recovery(tmp_path, data / f".coverage.c.{index}", "nosuchpkg_xyz")
        assert ended.returncode == 0, ended.stderr
        # Saved though nothing was measured: "ran, measured nothing" is not "never saved".
        assert (data / f".coverage.c.{index}").exists()
        assert "CoverageWarning" not in ended.stderr  # the run says it once, not each agent
    result = combine_and_report(data, tmp_path, "nosuchpkg_xyz")
    assert isinstance(result, Unmeasured)
    assert result.why is Nothing.OF_SOURCE
    assert result.data_files == 2
    assert "no file of nosuchpkg_xyz was measured" in result.message
    assert "--line-coverage-source" in result.message
    assert not (tmp_path / "coverage").exists()


def test_the_source_measured_is_named_with_the_total(tmp_path: Path) -> None:
    data = _project(tmp_path)
    _imports(tmp_path, data / IMPORTS_DATA, "tinypkg")
    ended = _recovery(tmp_path, data / ".coverage.c.2", "tinypkg")
    assert ended.returncode == 0, ended.stderr
    result = combine_and_report(data, tmp_path, "tinypkg")
    assert isinstance(result, LineCoverage)
    assert result.source == "tinypkg"
    assert result.data_files == 1
    assert 0 < result.percent < 100  # the os._exit branch never ran
    assert (tmp_path / "coverage" / "index.html").exists()


def test_a_directory_source_and_several_sources_are_measured(tmp_path: Path) -> None:
    data = _project(tmp_path)
    source = f"nosuchpkg_xyz,{tmp_path / 'tinypkg'}"  # as `run` passes two, one a directory
    assert _recovery(tmp_path, data / ".coverage.c.2", source).returncode == 0
    result = combine_and_report(data, tmp_path, "nosuchpkg_xyz, tinypkg")
    assert isinstance(result, LineCoverage)
    assert result.files == 2  # agent.py and __init__.py


def test_every_report_says_at_its_top_that_nothing_was_measured(tmp_path: Path) -> None:
    why = "no file of support_lg was measured"
    record = RunRecord(declared_branches=(), line_coverage_unmeasured=why)
    assert run_notes(record) == [f"--line-coverage measured nothing: {why}."]
    exposed = RunRecord(declared_branches=(), network_exposed="no netns", line_coverage_unmeasured=why)
    assert len(run_notes(exposed)) == 2
    assert run_notes(RunRecord(declared_branches=())) == []
    # Kept in run.json, and read back; older files, without the field, read as measured-or-not-asked.
    back = RunRecord.from_json(record.to_json(), tmp_path / "run.json")
    assert back.line_coverage_unmeasured == why
    older = RunRecord.from_json({"declared_branches": []}, tmp_path / "run.json")
    assert older.line_coverage_unmeasured is None
    assert older.options.line_coverage_source is None


def test_the_source_is_recorded_and_named_where_the_total_is_shown(tmp_path: Path) -> None:
    lines = LineCoverageRecord(61.5, "coverage/index.html", 12, source="support_lg")
    record = RunRecord(declared_branches=(), line_coverage=lines)
    assert RunRecord.from_json(record.to_json(), tmp_path / "run.json").line_coverage == lines
    older = {"declared_branches": [], "line_coverage": {"percent": 1.0, "html": "c/i.html", "recoveries": 1}}
    read = RunRecord.from_json(older, tmp_path / "run.json").line_coverage
    assert read is not None
    assert read.source is None
    assert "**61.5%** of `support_lg`" in markdown.render([], (), lines=lines)
    assert "61.5% of <code>support_lg</code>" in "".join(html_index.line_coverage(lines))


def test_resuming_with_another_source_is_another_run() -> None:
    named = RunOptions(agent="a", line_coverage_source=("support_lg",))
    default = RunOptions(agent="a")
    assert default.differences(named) == [("line_coverage_source", None, ("support_lg",))]
    assert "line_coverage_source" not in default.unrecorded()  # None: the adapter's guess


def test_a_source_without_line_coverage_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", "--scenario", "changelog-fast", "--line-coverage-source",
                                       "support_lg", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "--line-coverage-source names what --line-coverage measures; give --line-coverage too" \
        in result.output
    assert not out.exists()


def test_a_source_that_looks_like_a_path_must_be_a_directory(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--scenario", "changelog-fast", "--line-coverage",
                                       "--line-coverage-source", str(tmp_path / "nowhere"),
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "no such directory" in result.output
