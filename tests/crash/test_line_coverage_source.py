"""`run --line-coverage` names what it measured, or says on stderr, in run.json and in every report
why it measured nothing; `--line-coverage-source` picks what to measure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
NOTHING = "--line-coverage measured nothing: "


def _run(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "run", "--scenario", "changelog-fast", "--line-coverage", "--out", str(out),
                           "--jobs", "2", *extra], capture_output=True, text=True, timeout=600, check=False)


def test_a_source_the_agent_does_not_run_is_said_everywhere_not_silently_left_out(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _run(out, "--line-coverage-source", "nosuchpkg_xyz")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith(NOTHING)]
    assert len(said) == 1, proc.stderr
    assert "no file of nosuchpkg_xyz was measured" in said[0]
    assert "--line-coverage-source names the package or directory" in said[0]
    assert "CoverageWarning" not in proc.stderr
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert "line_coverage" not in run
    assert run["line_coverage_source"] == ["nosuchpkg_xyz"]
    assert said[0] == NOTHING + run["line_coverage_unmeasured"]
    for report in ("summary.md", "report.html", "junit.xml"):
        assert "--line-coverage measured nothing" in (out / report).read_text(encoding="utf-8"), report
    assert not (out / "coverage").exists()
    # A resumed run measuring something else is another run: refused, naming the option's field.
    again = _run(out, "--resume", "--line-coverage-source", "crashmatrix.agent")
    assert again.returncode == 2, again.stderr
    assert "line_coverage_source" in again.stderr


def test_the_default_source_is_measured_and_named(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = _run(out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert NOTHING not in proc.stderr
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    measured = run["line_coverage"]
    assert measured["percent"] > 30
    assert measured["source"] == "crashmatrix.agent"
    assert "line_coverage_unmeasured" not in run
    assert run["line_coverage_source"] is None  # the adapter's own choice
    assert f"{measured['percent']}% of crashmatrix.agent" in " ".join(proc.stdout.split())
    assert f"**{measured['percent']}%** of `crashmatrix.agent`" in (out / "summary.md").read_text()
    assert "--line-coverage measured nothing" not in (out / "summary.md").read_text()
