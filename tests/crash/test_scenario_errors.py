"""Scenario mistakes are not agent failures: a script gap and a script loop, end to end.

Each test writes a small scenario into tmp_path and runs `crashmatrix run` on it as a user would;
the verdict `scenario-error`, with its cause, must reach stdout, results.jsonl, summary.md,
junit.xml and report.html, and `crashmatrix report` must write the same files again.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
FIX = "no rule of the script matches this request; add a rule whose `when` holds for it"

# After a crash at the append, recovery sends an `unknown` result, and no rule reacts to it.
GAP = """
description = "no rule for an append whose outcome is unknown"
task = "Append the line 'x' to CHANGELOG.md."

[workspace]
"CHANGELOG.md" = "# Changelog\\n"

[tools]
enabled = ["read", "append_note"]

[[script]]
name = "start"
when = { turns = 0 }
reply.tool_calls = [{ tool = "append_note", args = { path = "CHANGELOG.md", line = "x" } }]

[[script]]
name = "done"
when = { last_turn = { append_note = "ok" } }
reply.final = "Added x."

[expect]
outcome = "completed"
"""

# The final answer waits for text the file never holds; the other rule always asks for a read.
LOOP = """
description = "a script that never ends the conversation"
task = "Read CHANGELOG.md until it says DONE."

[workspace]
"CHANGELOG.md" = "# Changelog\\n"

[tools]
enabled = ["read"]

[[script]]
name = "done"
when = { contains = { read = "DONE" } }
reply.final = "It says DONE."

[[script]]
name = "again"
reply.tool_calls = [{ tool = "read", args = { path = "CHANGELOG.md" } }]
"""


def crashmatrix(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


def scenario_dir(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "scenarios"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.toml").write_text(text, encoding="utf-8")
    return folder


def results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


REPORTS = ("summary.md", "junit.xml", "report.html")


def test_a_missing_rule_is_a_scenario_error_with_its_cause_in_every_report(tmp_path: Path) -> None:
    folder, out = scenario_dir(tmp_path, "gap", GAP), tmp_path / "out"
    proc = crashmatrix("run", "--scenarios", str(folder), "--scenario", "gap", "--out", str(out))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)  # bad input, not a violation
    assert "scenario errors (gap): the scenario is wrong, not the agent" in proc.stderr
    rows = results(out)
    wrong = [r for r in rows if r["verdict"] == "scenario-error"]
    assert wrong, "the crashes at or after the append reach the gap"
    assert {r["verdict"] for r in rows} == {"pass", "scenario-error"}, "no case blames the agent"
    first = wrong[0]
    cause = first["scenario_error"]
    assert first["violations"] == []
    assert cause["kind"] == "script-gap"
    assert cause["request"] == 1
    assert cause["incarnation"] == 2
    assert [m["role"] for m in cause["last_messages"]] == ["user", "assistant", "tool"]
    assert "outcome is unknown" in cause["last_messages"][-1]["text"]
    assert FIX in cause["message"]
    assert 'last_turn = { append_note = "unknown" }' in cause["message"]

    # stdout: the table's column and the cause, with the request's last messages
    assert "scenario error" in proc.stdout.splitlines()[0]
    assert "[scenario-error]\n      scenario error (script-gap): request #1 (inc2, recover)" in proc.stdout
    assert FIX in proc.stdout
    assert "          tool: call_0: ERROR: the run was interrupted" in proc.stdout
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert f"{len(wrong)} scenario errors" in summary
    assert "scenario error (script-gap)" in summary
    assert FIX in summary
    root = ET.fromstring((out / "junit.xml").read_bytes())
    assert (root.get("failures"), root.get("errors")) == ("0", str(len(wrong)))
    (error,) = [c.find("error") for c in root.iter("testcase") if c.get("name") == first["case"]]
    assert error is not None
    assert error.text is not None
    assert error.get("type") == "scenario-error"
    assert FIX in (error.get("message") or "")
    assert "tool: call_0: ERROR:" in error.text
    page = (out / "report.html").read_text(encoding="utf-8")
    assert 'class="cell v-scenario-error"' in page
    assert "<b>scenario error (script-gap)</b>" in page
    assert FIX in page

    before = {name: (out / name).read_bytes() for name in REPORTS}
    for name in REPORTS:
        (out / name).unlink()
    again = crashmatrix("report", str(out))
    assert again.returncode == 0, again.stderr
    assert {name: (out / name).read_bytes() for name in REPORTS} == before


def test_a_looping_script_is_stopped_at_the_step_bound_long_before_the_deadline(tmp_path: Path) -> None:
    folder, out = scenario_dir(tmp_path, "loop", LOOP), tmp_path / "out"
    started = time.monotonic()
    proc = crashmatrix("run", "--scenarios", str(folder), "--scenario", "loop", "--out", str(out),
                       "--timeout", "60", "--max-events", "400")
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert elapsed < 30, "killed at the bound, not at the 60 s deadline"
    (row,) = results(out)  # a recording that is a scenario error is not crashed further
    assert row["case"] == "loop/none"
    assert row["verdict"] == "scenario-error"
    assert row["duration_ms"] < 30_000
    cause = row["scenario_error"]
    assert (cause["kind"], cause["ended_by"], cause["events"], cause["bound"]) == (
        "script-loop", "max-events", 401, 400)
    assert cause["rule"] == "again"
    assert cause["repeats"] >= 20
    assert len(row["trace"][0]) == 400
    assert "emitted 401 probe events without ending (the step bound, --max-events, is 400)" in proc.stdout
    assert row["repro"].endswith("--max-events 400")
    assert "rule 'again' answered" in (out / "summary.md").read_text(encoding="utf-8")


def test_a_looping_script_the_agent_gives_up_on_is_a_scenario_error_too(tmp_path: Path) -> None:
    """The reference agent ends a run at 100 model replies, under the default step bound."""
    folder, out = scenario_dir(tmp_path, "loop", LOOP), tmp_path / "out"
    proc = crashmatrix("run", "--scenarios", str(folder), "--scenario", "loop", "--out", str(out),
                       "--timeout", "60")
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    (row,) = results(out)
    cause = row["scenario_error"]
    assert (row["verdict"], cause["ended_by"], cause["rule"]) == ("scenario-error", "agent", "again")
    assert "ended failed (step limit 100 reached)" in cause["message"]
    assert row["duration_ms"] < 30_000


def test_an_agent_that_runs_past_the_step_bound_on_its_own_is_a_liveness_violation(tmp_path: Path) -> None:
    """changelog-fast needs more than 20 events and its script does not loop: the agent is killed
    at event 21, and that is the agent's verdict, not the scenario's."""
    out = tmp_path / "out"
    proc = crashmatrix("run", "--scenario", "changelog-fast", "--out", str(out), "--max-events", "20",
                       "--json")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    (none,) = [r for r in results(out) if r["case"] == "changelog-fast/none"]
    assert none["verdict"] == "fail"
    assert none["scenario_error"] is None
    messages = [v["message"] for v in none["violations"] if v["invariant"] == "liveness"]
    assert messages == ["inc1 (run) emitted 21 events in one incarnation without ending; a runaway "
                        "loop (the step bound, --max-events, is 20)"]
