"""`run --case`: a slice of a matrix by case id (the recording runs too); an id that names no case
of the matrix is refused, naming it, with what ran kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
APPEND = "changelog-fast/07:provider.after:reply/kill"
START = "changelog-fast/02:commit.before:run_started.prompt,message.user/kill"


def _run(out: Path, *cases: str) -> subprocess.CompletedProcess[str]:
    args = [a for c in cases for a in ("--case", c)]
    return subprocess.run([*CLI, "run", "--scenario", "changelog-fast", "--out", str(out), *args],
                          capture_output=True, text=True, timeout=300, check=False)


def _cases(out: Path) -> list[str]:
    return [json.loads(line)["case"] for line in (out / "results.jsonl").read_text().splitlines()]


def test_only_the_named_cases_run_beside_the_recording(tmp_path: Path) -> None:
    done = _run(tmp_path / "out", APPEND, START)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(_cases(tmp_path / "out")) == sorted(["changelog-fast/none", START, APPEND])
    recorded = json.loads((tmp_path / "out" / "run.json").read_text())
    assert recorded["cases"] == sorted([APPEND, START])


def test_a_case_the_matrix_does_not_have_is_refused_by_name(tmp_path: Path) -> None:
    missing = "changelog-fast/99:provider.after:reply/kill"
    done = _run(tmp_path / "out", APPEND, missing)
    assert done.returncode == 2
    assert f"--case {missing}: no such case in this matrix" in done.stderr
    assert APPEND in _cases(tmp_path / "out"), "what ran is kept"
    bad = _run(tmp_path / "bad", "not-a-case-id")
    assert bad.returncode == 2
    assert "--case: bad case id 'not-a-case-id'" in bad.stderr
    assert not (tmp_path / "bad").exists(), "refused before anything was written"
    sharded = subprocess.run([*CLI, "run", "--out", str(tmp_path / "sh"), "--case", APPEND, "--shard", "1/2"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert sharded.returncode == 2
    assert "--case with --shard" in sharded.stderr


def test_without_scenario_only_the_named_cases_scenarios_are_recorded(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run([*CLI, "run", "--out", str(out), "--case", APPEND], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(_cases(out)) == sorted(["changelog-fast/none", APPEND])
    assert "--case: a slice of the matrix, 1 named case(s)" in done.stderr
