"""`repro` shows what an agent did to its workspace, and never what lies outside it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]

SCENARIO = '''
description = "an agent links a file from outside its workspace into it"
task = "link the secret"

[tools]
enabled = ["bash"]

[[script]]
name = "link"
when = {{ turns = 0 }}
reply.tool_calls = [{{ tool = "bash", args = {{ command = "ln -s {secret} leak.txt" }} }}]

[[script]]
name = "done"
when = {{ min_turns = 1 }}
reply.final = "linked"

[expect]
outcome = "completed"
'''


def test_repro_does_not_follow_a_workspace_symlink_out(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET VALUE\n")
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "escape.toml").write_text(SCENARIO.format(secret=secret))
    out = tmp_path / "out"
    run = subprocess.run([*CLI, "run", "--scenarios", str(scenarios), "--scenario", "escape",
                          "--out", str(out)], capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    case = next(r["case"] for r in rows if "effect.after:bash" in r["case"])
    proc = subprocess.run([*CLI, "repro", case, "--scenarios", str(scenarios)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"symlink -> {secret}" in proc.stdout
    assert "TOP SECRET VALUE" not in proc.stdout
