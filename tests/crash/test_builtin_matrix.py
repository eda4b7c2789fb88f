"""The product's main job on the built-ins: every case holds, every declared branch is reached."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.agent.recovery import DECLARED_BRANCHES

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
SCENARIOS = str(Path(__file__).resolve().parents[1] / "support" / "scenarios")
REPORTS = ("summary.md", "junit.xml", "report.html")


def crashmatrix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=1800, check=False)


@pytest.fixture(scope="module")
def builtin_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("builtin")
    return out, crashmatrix("run", "--require-coverage", "--json", "--out", str(out))


def test_every_builtin_case_holds_and_every_branch_is_reached(
        builtin_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = builtin_run
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["failed"] == 0
    assert len(summary["scenarios"]) >= 13
    reached = set()
    for line in (out / "results.jsonl").read_text().splitlines():
        reached.update(json.loads(line)["branches"])
    assert set(DECLARED_BRANCHES) <= reached


def test_report_regenerates_identical_files(
        builtin_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    out, _ = builtin_run
    before = {name: (out / name).read_bytes() for name in REPORTS}
    proc = crashmatrix("report", str(out), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert {name: (tmp_path / name).read_bytes() for name in REPORTS} == before


def test_without_one_scenario_require_coverage_names_the_unreached_branch(
        builtin_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    out, _ = builtin_run
    kept = [line for line in (out / "results.jsonl").read_text().splitlines()
            if json.loads(line)["scenario"] != "policy-changed"]
    (tmp_path / "results.jsonl").write_text("\n".join(kept) + "\n")
    proc = crashmatrix("report", str(tmp_path), "--require-coverage")
    assert proc.returncode == 1
    assert "call.unknown_policy_now_never" in proc.stderr


def test_line_coverage_measures_recoveries_only(tmp_path: Path) -> None:
    proc = crashmatrix("run", "--scenarios", SCENARIOS, "--scenario", "tiny", "--line-coverage",
                       "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    match = re.search(r"coverage of the agent in recovery incarnations: ([\d.]+)% \((\d+) recoveries",
                      proc.stderr)
    assert match, proc.stderr
    assert float(match.group(1)) > 30
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    later_exited = sum(1 for r in rows for code in r["exit_codes"][1:] if code is not None)
    assert 0 < int(match.group(2)) <= later_exited
    assert (tmp_path / "coverage" / "index.html").exists()
    html = (tmp_path / "coverage" / "index.html").read_text()
    assert "recovery.py" in html
