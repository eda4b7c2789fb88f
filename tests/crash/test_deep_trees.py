"""Issue 33, L1: a tool that makes a directory 1,200 levels deep in the workspace is a case like
any other: judged, its tree removed, and the next run on the machine unaffected."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.execution.trees import remove_tree

pytestmark = pytest.mark.crash
DEEP = 1200  # past Python's recursion limit; one `mkdir -p` (its path stays under PATH_MAX)
MAKE = f"mkdir -p $(printf 'd/%.0s' $(seq {DEEP})) && echo made"
SCENARIO = f'''description = "a tool makes a very deep tree"
task = "Make the deep tree."

[tools]
enabled = ["bash"]

[[script]]
name = "start"
when = {{ turns = 0 }}
reply.tool_calls = [{{ tool = "bash", args = {{ command = {json.dumps(MAKE)} }} }}]

[[script]]
name = "again"
when = {{ last_turn = {{ bash = ["unknown", "error"] }} }}
reply.final = "could not tell"

[[script]]
name = "report"
when = {{ last_turn = {{ bash = "ok" }} }}
reply.final = "done"

[expect]
outcome = "completed"
'''


def test_a_very_deep_workspace_tree_is_judged_and_removed(tmp_path: Path) -> None:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "deep.toml").write_text(SCENARIO, encoding="utf-8")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env_run = [sys.executable, "-m", "crashmatrix", "run", "--scenarios", str(tmp_path / "scenarios"),
               "--scenario", "deep", "--fault", "kill", "--json"]  # a tree per case: kills suffice
    env = {**os.environ, "CRASHMATRIX_TMPDIR": str(scratch)}
    try:
        slice_: list[str] = []
        for out in ("out1", "out2"):  # the second run sweeps whatever the first left
            done = subprocess.run([*env_run, "--out", str(tmp_path / out), *slice_], env=env,
                                  capture_output=True, text=True, timeout=600, check=False)
            assert done.returncode in (0, 1), done.stderr[-3000:]
            assert "RecursionError" not in done.stderr
            lines = (tmp_path / out / "results.jsonl").read_text().splitlines()
            results = [json.loads(line) for line in lines]
            assert results, done.stderr[-3000:]
            assert all(r["verdict"] in ("pass", "fail") for r in results), results[0]
            # The second run, a sweep and a tree of its own, needs only one crash case beside its
            # recording: the last crash point, once the tree is made.
            slice_ = ["--case", max(r["case"] for r in results if r["case"] != "deep/none")]
        assert list(scratch.iterdir()) == [], "every case tree was removed"
    finally:
        remove_tree(scratch)  # never leave pytest's clean-up (which recurses) a deep tree
