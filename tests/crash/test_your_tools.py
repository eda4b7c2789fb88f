"""A scenario for the agent's own tools: checked against the tools the agent declares before
anything runs (an app that does not load: tests/crash/test_framework_tools.py), and a crash-free
run that already fails stopping its scenario's matrix after one case."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]

REFUND = """
task = "Order A-1001: tell the customer their refund is on its way."
[tools]
enabled = ["lookup_order", "send_email"]
[[script]]
when.results = { send_email = "none" }
[[script.reply.tool_calls]]
tool = "send_email"
args = { to = "ana@example.com", subject = "Refund", body = "Done." }
[[script]]
reply.final = "Emailed."
"""

FAILS_CRASH_FREE = """
description = "expects a line the task never writes: every run fails, crash-free included"
task = "append a line to CHANGELOG.md"
workspace = { "CHANGELOG.md" = "# Changelog\\n" }
[tools]
enabled = ["append_note"]
[[script]]
when.results = { append_note = "none" }
reply.tool_calls = [{ tool = "append_note", args = { path = "CHANGELOG.md", line = "fixed" } }]
[[script]]
reply.final = "Done."
[[expect.patterns]]
path = "CHANGELOG.md"
pattern = "^released$"
count = 1
"""


def crashmatrix(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600, check=False,
                          cwd=cwd, stdin=subprocess.DEVNULL)


def test_a_scenario_naming_a_tool_the_agent_lacks_is_exit_2_naming_scenario_tool_and_tools(
        tmp_path: Path) -> None:
    (tmp_path / "refund.toml").write_text(REFUND, encoding="utf-8")
    out = tmp_path / "out"
    proc = crashmatrix("run", "--scenarios", str(tmp_path), "--scenario", "refund", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    assert "scenario 'refund'" in proc.stderr
    assert "'send_email', which agent 'durable-agent' does not have" in proc.stderr
    assert "its tools: append_note, bash, edit, post_json, read, stop_run, write" in proc.stderr
    assert not (out / "results.jsonl").exists()  # refused before any case ran


def test_the_default_set_with_an_agent_that_fits_none_of_it_is_exit_2_saying_why(tmp_path: Path) -> None:
    # The support app has lookup_order and send_email; every built-in calls our reference tools.
    example = Path(__file__).resolve().parents[2] / "examples" / "support_app"
    proc = crashmatrix("run", "--agent", "langgraph:support_lg.fixed:build", "--out", str(tmp_path / "o"),
                       cwd=example)
    assert proc.returncode == 2, proc.stderr
    assert "can run none of the scenarios" in proc.stderr
    assert "scenario 'changelog-fast'" in proc.stderr
    assert "its tools: lookup_order, send_email" in proc.stderr


def test_a_crash_free_run_that_fails_stops_its_matrix_after_one_case(tmp_path: Path) -> None:
    (tmp_path / "fails.toml").write_text(FAILS_CRASH_FREE, encoding="utf-8")
    out = tmp_path / "out"
    proc = crashmatrix("run", "--scenarios", str(tmp_path), "--scenario", "fails", "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["case"] for r in results] == ["fails/none"]
    assert results[0]["verdict"] == "fail"
    assert "fails: the crash-free run already fails (scenario-oracle)" in proc.stderr
    assert "CHANGELOG.md lines matching '^released$': 0" in proc.stderr
    assert "crashmatrix repro fails/none" in proc.stderr
