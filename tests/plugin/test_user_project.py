"""Issue 34: crashmatrix in a user's own project (the support example copied out): its pytest suite
with the plugin pinned in pyproject.toml and a baseline of known failures is green; forgetting
one is red naming the case; fixing the app reports the listed cases as XPASS(strict)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
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


def test_a_users_suite_is_green_with_its_baseline_and_red_on_what_is_new(tmp_path: Path) -> None:
    project = tmp_path / "support"
    shutil.copytree(SUPPORT, project, ignore=shutil.ignore_patterns("__pycache__", "out-*", "merged"))
    (project / "pyproject.toml").write_text(PYPROJECT.format(variant="broken"), encoding="utf-8")
    (project / "test_own.py").write_text(OWN_TEST, encoding="utf-8")
    known = json.loads((project / "crashmatrix-baseline.json").read_text(encoding="utf-8"))["cases"]
    assert len(known) == 2

    green = _pytest(project)
    assert green.returncode == 0, green.stdout[-3000:] + green.stderr[-3000:]
    assert "2 xfailed" in green.stdout
    assert "known failure (baseline): at-most-once, scenario-oracle" in green.stdout
    only_own = _pytest(project, "-m", "not crash")
    assert "1 passed" in only_own.stdout, only_own.stdout[-2000:]

    forgotten = sorted(known)[0]
    (project / "crashmatrix-baseline.json").write_text(json.dumps(
        {"format": 1, "cases": {c: v for c, v in known.items() if c != forgotten}}), encoding="utf-8")
    red = _pytest(project)
    assert red.returncode == 1, red.stdout[-3000:]
    assert f"FAILED crashmatrix::{forgotten}" in red.stdout

    (project / "crashmatrix-baseline.json").write_text(json.dumps({"format": 1, "cases": known}),
                                                       encoding="utf-8")
    (project / "pyproject.toml").write_text(PYPROJECT.format(variant="fixed"), encoding="utf-8")
    fixed = _pytest(project)
    assert fixed.returncode == 1, fixed.stdout[-3000:]
    for case in known:
        assert f"{case}: XPASS(strict): listed as a known failure" in fixed.stdout


pytestmark = pytest.mark.crash
