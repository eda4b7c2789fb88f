"""`crashmatrix compare` end to end: our agent holds where the messages-only baseline doubles its effect."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]


def test_the_table_shows_our_agent_holding_and_the_baseline_violating(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    proc = subprocess.run([*CLI, "compare", "--agent", "durable-agent", "--agent", "messages-only",
                           "--scenario", "changelog-fast", "--scenario", "cancel", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    at = {(c["scenario"], c["agent"]): c for c in data["cells"]}
    assert at["changelog-fast", "durable-agent"]["status"] == "held"
    assert at["cancel", "durable-agent"]["status"] == "held"
    baseline = at["changelog-fast", "messages-only"]
    assert baseline["status"] == "violated"
    assert "at-most-once" in baseline["invariants"]
    assert baseline["repro"].startswith(f"crashmatrix repro {baseline['first_case']}")
    assert baseline["repro"].endswith("--agent messages-only")
    # The baseline has no inbox: the cancel scenario is a cell that says why, not an error.
    assert at["cancel", "messages-only"]["status"] == "not run"
    assert "'inbox'" in at["cancel", "messages-only"]["reason"]
    # The cells agree with each agent's own results, written beside the table.
    rows = [json.loads(line) for line in
            (out / "agents" / "messages-only" / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    failing = [r for r in rows if r["verdict"] == "fail"]
    assert baseline["failing"] == len(failing)
    assert baseline["cases"] == len(rows)
    assert set(baseline["invariants"]) == {v["invariant"] for r in failing for v in r["violations"]}
    assert "held (" in proc.stdout
    assert baseline["repro"] in proc.stdout
    for name in ("compare.md", "compare.html", "agents/durable-agent/report.html"):
        assert (out / name).is_file(), name


def test_an_out_holding_someone_elses_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "compare.md").write_text("mine\n", encoding="utf-8")
    proc = subprocess.run([*CLI, "compare", "--agent", "durable-agent", "--scenario", "changelog-fast",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "no compare.json says crashmatrix wrote them" in proc.stderr
    assert (tmp_path / "compare.md").read_text(encoding="utf-8") == "mine\n"


def test_an_unknown_agent_is_refused_before_anything_runs(tmp_path: Path) -> None:
    proc = subprocess.run([*CLI, "compare", "--agent", "durable-agent", "--agent", "nope", "--out",
                           str(tmp_path / "o")], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "unknown agent 'nope'" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_an_interrupted_compare_writes_what_finished_and_resume_runs_the_rest(tmp_path: Path) -> None:
    """Issue 34, item 5: SIGINT while the second agent runs: the table holds the first agent's
    cells and marks the second not run; `--resume` keeps the first's run and runs the second."""
    out = tmp_path / "cmp"
    args = [*CLI, "compare", "--agent", "durable-agent", "--agent", "messages-only", "--scenario",
            "changelog-fast", "--out", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("crashmatrix compare: messages-only:"):
            proc.send_signal(signal.SIGINT)
            break
    rest = proc.communicate(timeout=300)[1]
    assert proc.returncode == 3, "".join(seen) + rest
    data = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    at = {(c["scenario"], c["agent"]): c for c in data["cells"]}
    assert at["changelog-fast", "durable-agent"]["status"] == "held"
    assert at["changelog-fast", "messages-only"]["status"] == "not run"
    assert "interrupted" in at["changelog-fast", "messages-only"]["reason"]
    assert "interrupted" in (out / "compare.md").read_text(encoding="utf-8")
    assert "--resume" in rest

    resumed = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "durable-agent: kept its finished run" in resumed.stderr
    data = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    at = {(c["scenario"], c["agent"]): c for c in data["cells"]}
    assert at["changelog-fast", "durable-agent"]["status"] == "held"
    assert at["changelog-fast", "messages-only"]["status"] == "violated"
    # Other options are refused, not mixed in.
    other = subprocess.run([*args, "--resume", "--max-events", "500"], capture_output=True, text=True,
                           timeout=120, check=False)
    assert other.returncode == 2, other.stderr
    assert "was run with other options" in other.stderr
