"""Any agent through the door: named by path or entry point, judged without a store reader, and
refused (exit 2) when a scenario needs what its adapter does not declare."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.crash
ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / "examples" / "toy_agent"
CLI = [sys.executable, "-m", "crashmatrix"]
STORE_BOUND = {"log-integrity", "pairing", "no-silent-success", "safe-rerun", "finished-stays-finished",
               "scenario-oracle", "liveness", "at-most-once",
               "continuation", "resume-budget", "queued-input", "retry-intent",
               "intent-before-effect", "reserved-result", "durable-commits", "final-ends-run",
               "retry-bound", "downstream-key", "status-before-resend", "downstream-backed",
               # Not the store: the toy adapter declares no `concurrent`, so no second process.
               "one-writer"}


def crashmatrix(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def _toy(where: Path, rerun_started: bool = False) -> Path:
    """The toy agent's package, written into `where` (optionally with the bug of re-running a
    call whose outcome is unknown)."""
    pkg = where / "toyagent"
    shutil.copytree(TOY / "toyagent", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    if rerun_started:
        source = (pkg / "agent.py").read_text()
        assert 'if c["id"] in started:' in source
        (pkg / "agent.py").write_text(source.replace('if c["id"] in started:', "if False:"))
    return where


def _results(out: Path) -> dict[str, dict[str, Any]]:
    return {r["case"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def test_a_toy_agent_named_by_path_holds_and_its_buggy_twin_is_caught(tmp_path: Path) -> None:
    good = _toy(tmp_path / "good")
    proc = crashmatrix("run", "--agent", "toyagent.adapter:AGENT", "--scenario", "changelog-fast",
                       "--out", str(tmp_path / "good-out"), "--json", cwd=good)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["cases"] > 30
    assert set(summary["not_applicable"]) == STORE_BOUND, "not judged is said, never held"
    results = _results(tmp_path / "good-out")
    assert {r["agent"] for r in results.values()} == {"toyagent.adapter:AGENT"}

    # Killed after the append took effect and before its result was saved: the buggy twin's
    # re-run appends the line a second time, which the workspace shows without any store. (Its
    # run is that case alone: every crash-free and crash case of the good one ran above.)
    window = next(c for c in results if ":effect.after:append_note/kill" in c)
    assert results[window]["verdict"] == "pass"
    bad = _toy(tmp_path / "bad", rerun_started=True)
    proc = crashmatrix("run", "--agent", "toyagent.adapter:AGENT", "--scenario", "changelog-fast",
                       "--case", window, "--out", str(tmp_path / "bad-out"), "--json", cwd=bad)
    assert proc.returncode == 1, proc.stderr
    bad_results = _results(tmp_path / "bad-out")
    assert sorted(bad_results) == sorted(["changelog-fast/none", window])
    assert "at-most-once" in {v["invariant"] for v in bad_results[window]["violations"]}
    assert bad_results[window]["repro"].endswith("--agent toyagent.adapter:AGENT")


def test_the_entry_point_route_and_list_agents(tmp_path: Path) -> None:
    project = _toy(tmp_path / "project")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "toyagent"\nversion = "0.1"\n'
        '[project.entry-points."crashmatrix.adapters"]\ntoy = "toyagent.adapter:AGENT"\n'
        '[tool.setuptools]\npackages = ["toyagent"]\n')
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(site), str(project)], check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(site)}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = crashmatrix("list", "--agents", cwd=elsewhere, env=env)
    assert listed.returncode == 0, listed.stderr
    toy_row = next(line for line in listed.stdout.splitlines() if line.startswith("toy "))
    assert "entry point of toyagent" in toy_row
    assert toy_row.rstrip().endswith("kill")
    proc = crashmatrix("run", "--agent", "toy", "--scenario", "changelog-fast", "--out",
                       str(tmp_path / "out"), "--json", cwd=elsewhere, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert json.loads(proc.stdout)["cases"] > 30


def test_a_scenario_needing_an_inbox_is_refused_for_an_agent_without_one(tmp_path: Path) -> None:
    project = _toy(tmp_path / "project")
    proc = crashmatrix("run", "--agent", "toyagent.adapter:AGENT", "--scenario", "queued-input",
                       "--out", str(tmp_path / "out"), cwd=project)
    assert proc.returncode == 2
    assert ("scenario 'queued-input' delivers inputs while the agent runs, but agent 'toy' declares "
            "no 'inbox' capability") in proc.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists(), "refused before anything ran"
    proc = crashmatrix("repro", "changelog/03:commit.written:message/torn", "--agent",
                       "toyagent.adapter:AGENT", cwd=project)
    assert proc.returncode == 2
    assert "fault 'torn' needs tear, which agent 'toy' does not declare" in proc.stderr


NO_STORE = """
import copy

from crashmatrix.harness.adapters.baseline import ADAPTER
from crashmatrix.harness.adapters.interface import Capability

# The messages-only baseline with its store reader switched off.
AGENT = copy.copy(ADAPTER)
AGENT.capabilities = ADAPTER.capabilities - {Capability.STORE}
"""


@pytest.mark.parametrize("store", [True, False])
def test_the_baseline_double_append_is_found_with_and_without_its_store(tmp_path: Path,
                                                                        store: bool) -> None:
    (tmp_path / "nostore.py").write_text(NO_STORE)
    agent = "messages-only" if store else "nostore:AGENT"
    # changelog-fast: the running example with `echo` for the tests (`changelog` runs a real
    # `pytest -q` in every bash call: four times the CPU, for the same append window).
    proc = crashmatrix("run", "--agent", agent, "--scenario", "changelog-fast", "--out",
                       str(tmp_path / "out"), "--json", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    summary = json.loads(proc.stdout)
    window = [f for f in summary["failures"] if ":effect.after:append_note/kill" in f["case"]]
    assert window
    assert all("at-most-once" in f["invariants"] for f in window)
    assert all(f["repro"].endswith(f"--agent {agent}") for f in window)
    assert bool(summary["not_applicable"]) is not store


def test_no_agent_is_our_agent_through_the_door_by_every_route(tmp_path: Path) -> None:
    # The default, the registered name and the import path reach the same adapter the same way:
    # the same case ids, events and verdicts.
    scenarios = str(ROOT / "tests" / "support" / "scenarios")
    seen = []
    for i, agent in enumerate([None, "durable-agent", "crashmatrix.harness.adapters.durable:ADAPTER"]):
        out = tmp_path / f"out{i}"
        extra = [] if agent is None else ["--agent", agent]
        proc = crashmatrix("run", "--scenarios", scenarios, "--scenario", "tiny", "--out", str(out),
                           "--json", *extra, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        rows = _results(out)
        seen.append(sorted((case, r["verdict"], r["trace"], r["not_applicable"]) for case, r in rows.items()))
    assert seen[0] == seen[1] == seen[2]
    assert len(seen[0]) > 20


def test_every_command_refuses_what_the_agent_cannot_take_and_keeps_earlier_results(tmp_path: Path) -> None:
    project = _toy(tmp_path / "project")
    agent = ["--agent", "toyagent.adapter:AGENT"]
    for command in (["list", "--cases"], ["bench", "--skip-fresh"]):
        proc = crashmatrix(*command, *agent, "--scenario", "queued-input", cwd=project)
        assert proc.returncode == 2, (command, proc.stderr)
        assert "declares no 'inbox' capability" in proc.stderr
        assert "Traceback" not in proc.stderr
    # A refused --line-coverage run touches nothing in --out.
    out = tmp_path / "out"
    first = crashmatrix("run", *agent, "--scenario", "changelog-fast", "--out", str(out), cwd=project)
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    proc = crashmatrix("run", *agent, "--scenario", "changelog-fast", "--out", str(out), "--line-coverage",
                       cwd=project)
    assert proc.returncode == 2
    assert "no Python entry point" in proc.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # merge carries the run description, so report knows the agent's (empty) branch list.
    merged = tmp_path / "merged"
    assert crashmatrix("merge", str(out), "--out", str(merged), cwd=project).returncode == 0
    proc = crashmatrix("report", str(merged), "--require-coverage", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert "not-applicable:log-integrity" in (merged / "junit.xml").read_text()
