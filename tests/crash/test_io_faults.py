"""I/O faults by injection: our agent stops (exit 4) or writes the rest, then recovers; mutants die."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from crashmatrix.harness.execution.hunt import hunt
from crashmatrix.harness.faults.io_error import SHORT_COUNT, SHORT_WRITE
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from tests.support.mutant_hunt import mutant_runner

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
# The sync of the result of append_note (its 4th commit): the line is in CHANGELOG.md.
RESULT_SYNC = "changelog-fast/04:fsync:session.jsonl/eio-fsync"
SHORT = "changelog-fast/02:write:session.jsonl/short-write"  # the write of the model's first reply


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


def test_our_agent_writes_the_rest_after_each_short_write_and_holds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = crashmatrix("run", "--scenario", "changelog-fast", "--fault", "short-write", "--json",
                       "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 9  # the recording, and one case per commit
    assert {r["verdict"] for r in results} == {"pass"}
    repro = crashmatrix("repro", SHORT)
    assert repro.returncode == 0, repro.stdout + repro.stderr
    first = repro.stdout.split("-- incarnation 2")[0]
    assert f"write 2 of session.jsonl: retval={SHORT_COUNT}" in first
    # A real prefix: 16 bytes of the commit's line went out, the agent wrote the rest after them.
    assert re.search(rf"session/session\.jsonl: the short write wrote {SHORT_COUNT} of \d+ bytes", first)
    assert first.rstrip().endswith("exit code 0")
    assert "every invariant held" in repro.stdout


def test_ignores_short_write_passes_every_other_fault_and_the_old_short_write_and_is_killed_by_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = MutantName.IGNORES_SHORT_WRITE
    assert CATALOGUE[name].faults == ("short-write",)
    with mutant_runner(name, tmp_path, fsync=True) as (scenarios, config):
        others = hunt(name, scenarios, config, jobs=2,
                      faults=("kill", "second", "torn", "power", "eio-fsync", "enospc-write"))
        killed = hunt(name, scenarios, config, jobs=2, faults=("short-write",))
        # The fault as it was: the call returned 0 with nothing written; the mutant writes again
        # (whole) after a write of nothing, which is right after that, so it passed.
        monkeypatch.setattr(SHORT_WRITE, "how", "retval=0")
        old = hunt(name, scenarios, config, jobs=2, faults=("short-write",))
    assert not others.killed, others
    assert others.unjudged == 0
    assert not old.killed, old
    assert old.cases == 9
    assert old.unjudged == 0
    assert killed.killed
    assert killed.case == "changelog-fast/01:write:session.jsonl/short-write"
    assert killed.invariant == "log-integrity"
    assert killed.repro == f"crashmatrix repro {killed.case} --agent mutant:ignores-short-write"
    assert no_strace_left()
    repro = crashmatrix("repro", killed.case, "--agent", "mutant:ignores-short-write")
    assert repro.returncode == 1, repro.stdout + repro.stderr
    # The log's damage, named: the first commit cut short, the second appended to its half line.
    assert re.search(r"log-integrity: the session store is not intact: .*session\.jsonl: line 1: ",
                     repro.stdout), repro.stdout
