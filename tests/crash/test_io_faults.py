"""I/O-error faults by injection: our agent stops (exit 4) and recovers; a mutant carrying on is killed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from crashmatrix.harness.execution.hunt import hunt
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from tests.support.mutant_hunt import mutant_runner

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
# The sync of the result of append_note (its 4th commit): the line is in CHANGELOG.md.
RESULT_SYNC = "changelog-fast/04:fsync:session.jsonl/eio-fsync"


def crashmatrix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, check=False)


def no_strace_left() -> bool:
    return not [p for p in psutil.Process().children(recursive=True) if p.name() == "strace"]


def test_our_agent_stops_at_each_failed_sync_and_write_and_a_recover_completes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = crashmatrix("run", "--scenario", "changelog-fast", "--fault", "eio-fsync", "--fault",
                       "enospc-write", "--json", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    injected = [r for r in results if r["case"] != "changelog-fast/none"]
    assert len(injected) == 16
    assert {r["verdict"] for r in injected} == {"pass"}
    repro = crashmatrix("repro", RESULT_SYNC)
    assert repro.returncode == 0, repro.stdout + repro.stderr
    first = repro.stdout.split("-- incarnation 2")[0]
    assert "XX failed by strace: fsync 4 of session.jsonl: error=EIO" in first
    assert "bytes a failed sync was to save never reached the disk" in first
    assert first.rstrip().endswith("exit code 4")
    assert "commit.after:message.tool.append_note" not in first  # not acknowledged


def test_ignores_failed_sync_survives_the_older_faults_and_is_killed_by_eio_fsync(tmp_path: Path) -> None:
    name = MutantName.IGNORES_FAILED_SYNC
    assert CATALOGUE[name].faults == ("eio-fsync",)
    with mutant_runner(name, tmp_path, fsync=True) as (scenarios, config):
        survived = hunt(name, scenarios, config, jobs=2, faults=("kill", "second", "torn", "power"))
        killed = hunt(name, scenarios, config, jobs=2, faults=("eio-fsync",))
    assert not survived.killed, survived
    assert survived.unjudged == 0
    assert killed.killed
    assert killed.case == "changelog-fast/01:fsync:session.jsonl/eio-fsync"
    assert killed.invariant in ("liveness", "log-integrity")
    assert killed.repro == f"crashmatrix repro {killed.case} --agent mutant:ignores-failed-sync"
    assert no_strace_left()
    repro = crashmatrix("repro", killed.case, "--agent", "mutant:ignores-failed-sync")
    assert repro.returncode == 1, repro.stdout + repro.stderr
