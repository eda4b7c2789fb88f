"""Issue 34: crashmatrix in a user's own project (the support example copied out): its pytest suite
with the plugin pinned in pyproject.toml and a baseline of known failures is green; forgetting
one is red naming the case; fixing the app reports the listed cases as XPASS(strict)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = ROOT / "examples" / "support_app"
PYPROJECT = """
[tool.pytest.ini_options]
crashmatrix_agent = "langgraph:support_lg.{variant}:build"
crashmatrix_scenarios = ["scenarios"]
crashmatrix_scenario = ["refund"]
crashmatrix_baseline = "crashmatrix-baseline.json"
"""
OWN_TEST = "def test_the_users_own_test():\n    assert True\n"


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The known failures and the recording, not the whole matrix: the point is the baseline.
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--crashmatrix",
                           "-k", "own or none or 35 or 36", "-rfxX", *args], cwd=project,
                          capture_output=True, text=True, timeout=600, check=False)


def _project(where: Path, variant: str, cases: dict[str, list[str]] | None = None) -> Path:
    """The support example copied out as a user's project: its app, its scenarios, its own test,
    the plugin pinned in pyproject.toml, and its baseline (as committed, or `cases`)."""
    project = where / f"support-{variant}"
    shutil.copytree(SUPPORT, project, ignore=shutil.ignore_patterns("__pycache__", "out-*", "merged"))
    (project / "pyproject.toml").write_text(PYPROJECT.format(variant=variant), encoding="utf-8")
    (project / "test_own.py").write_text(OWN_TEST, encoding="utf-8")
    if cases is not None:
        (project / "crashmatrix-baseline.json").write_text(json.dumps({"format": 1, "cases": cases}),
                                                           encoding="utf-8")
    return project


def test_a_users_suite_is_green_with_its_baseline_and_red_on_what_is_new(tmp_path: Path) -> None:
    known = json.loads((SUPPORT / "crashmatrix-baseline.json").read_text(encoding="utf-8"))["cases"]
    assert len(known) == 2
    forgotten = sorted(known)[0]
    projects = [_project(tmp_path / "green", "broken"),
                _project(tmp_path / "red", "broken", {c: v for c, v in known.items() if c != forgotten}),
                _project(tmp_path / "fixed", "fixed")]
    # Three projects, three suites, run side by side (each is its own pytest process).
    with ThreadPoolExecutor(3) as pool:
        green, red, fixed = pool.map(_pytest, projects)

    assert green.returncode == 0, green.stdout[-3000:] + green.stderr[-3000:]
    assert "2 xfailed" in green.stdout
    assert "2 passed" in green.stdout  # the project's own test and the recording, beside them
    assert "known failure (baseline): at-most-once, scenario-oracle" in green.stdout

    assert red.returncode == 1, red.stdout[-3000:]
    assert f"FAILED crashmatrix::{forgotten}" in red.stdout

    assert fixed.returncode == 1, fixed.stdout[-3000:]
    for case in known:
        assert f"{case}: XPASS(strict): listed as a known failure" in fixed.stdout


pytestmark = pytest.mark.crash
