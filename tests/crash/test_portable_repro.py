"""Repro commands printed by a run hold no absolute path of the machine: run from the repository
root of another checkout, they reproduce their case."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
BUILTIN = Path(__file__).resolve().parents[2] / "scenarios" / "builtin"


def _repository(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=60)
    (root / "checks" / "scenarios").mkdir(parents=True)
    shutil.copy(BUILTIN / "changelog-fast.toml", root / "checks" / "scenarios" / "my-changelog.toml")
    (root / "tools").mkdir()


def _written(out: Path) -> dict[str, str]:
    return {name: (out / name).read_text(encoding="utf-8")
            for name in ("results.jsonl", "junit.xml", "report.html", "summary.md")}


@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_repro_lines_name_no_absolute_path_and_run_from_another_clone(tmp_path: Path, absolute: bool) -> None:
    made, other = tmp_path / "ci-runner" / "build", tmp_path / "laptop" / "clone"
    _repository(made)
    # Run from a subdirectory of the repository, naming the scenarios by a path with `..` (or an
    # absolute one): the printed commands still name them from the root.
    scenarios = str(made / "checks" / "scenarios") if absolute else "../checks/scenarios"
    proc = subprocess.run([*CLI, "run", "--scenarios", scenarios, "--scenario", "my-changelog",
                           "--agent", "mutant:rerun-never", "--out", "../out", "--json"],
                          cwd=made / "tools", capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    failures = json.loads(proc.stdout)["failures"]
    assert failures, "the mutant must be caught for this test to see repro lines"
    written = _written(made / "out")
    for name, text in written.items():
        for machine_path in {str(tmp_path), str(tmp_path.resolve())}:
            assert machine_path not in text, f"{name} holds the run's absolute path {machine_path}"
    results = [json.loads(line) for line in written["results.jsonl"].splitlines()]
    failing = [r for r in results if r["verdict"] != "pass"]
    for r in failing:
        assert r["repro"] == (f"crashmatrix repro {shlex.quote(r['case'])} --scenarios checks/scenarios"
                              " --agent mutant:rerun-never")
        assert r["repro"] in written["junit.xml"] or shlex.quote(r["case"]) in written["junit.xml"]
    # The command, as printed, in another checkout of the same tree, from its root.
    _repository(other)
    case = failing[0]
    command = shlex.split(case["repro"])
    again = subprocess.run([*CLI, *command[1:]], cwd=other, capture_output=True, text=True,
                           timeout=300, check=False)
    assert again.returncode == 1, again.stdout[-2000:] + again.stderr[-2000:]
    assert again.stdout.startswith(f"case {case['case']}: FAIL"), again.stdout[:300]
    violated = again.stdout.split("-- violated\n", 1)[1]
    first = sorted({v["invariant"] for v in case["violations"]})
    assert any(violated.lstrip().startswith(f"{inv}:") for inv in first), violated[:500]
