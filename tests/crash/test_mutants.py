"""`crashmatrix mutants`: the matrix and the verifier kill every mutant of the catalogue."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from crashmatrix.harness.execution.hunt import hunt, hunt_all
from crashmatrix.harness.execution.spawn import SpawnMode
from crashmatrix.harness.faults.registry import faults_for
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from tests.support.mutant_hunt import mutant_runner

pytestmark = pytest.mark.crash
COMMAND = [sys.executable, "-m", "crashmatrix", "mutants"]


def leftovers(root: Path) -> list[str]:
    """Processes still working under `root` (a forked agent's command line is the zygote's, so
    its working directory, the case directory, is what gives it away)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            where = p.cwd()
        except (psutil.Error, OSError):
            continue
        cmd = " ".join(p.info["cmdline"] or [])
        if p.pid != os.getpid() and (str(root) in where or str(root) in cmd):
            found.append(f"{p.pid}: {cmd[:120]}")
    return found


def test_every_mutant_is_killed_by_its_own_scenarios(tmp_path: Path) -> None:
    # A short case deadline: no-client-timeout is killed by hanging until it (the others end in
    # well under a second a case).
    # From crash states (`mutants --states`, in half the time): that states kill each by the same
    # case as real kills is tests/crash/test_states.py's check; the cases no state can start
    # (power losses, system-call steps) run as real kills here too.
    hunts = hunt_all(list(MutantName), jobs=2, work=tmp_path, timeout_s=8.0, states=True)
    survivors = [h.mutant.value for h in hunts if not h.killed]
    assert survivors == [], f"mutants survived: {survivors}"
    for h in hunts:
        assert h.focused, f"{h.mutant} was killed only by the fallback ({h.case})"
        assert h.case is not None
        assert h.case.split("/")[0] in CATALOGUE[h.mutant].scenarios
        assert h.invariant, h
        assert h.unjudged == 0, h
    assert leftovers(tmp_path) == []


def test_the_command_prints_json_and_exits_0_when_all_are_killed_in_either_spawn_mode() -> None:
    for spawn in SpawnMode:
        proc = subprocess.run([*COMMAND, "--mutant", "resume-finished", "--json", "--spawn", spawn.value],
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == [{"mutant": "resume-finished", "killed": True,
                                            "case": "finished/none",
                                            "invariant": "finished-stays-finished",
                                            "repro": "crashmatrix repro finished/none "
                                                     "--agent mutant:resume-finished"}]
        assert "mutant resume-finished: killed by finished/none" in proc.stderr


def test_the_table_names_mutant_verdict_case_and_invariant() -> None:
    proc = subprocess.run([*COMMAND, "--mutant", "bare-continue", "--mutant", "resume-finished"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    table, _, repros = proc.stdout.partition("\n\n")
    header, _rule, *rows = table.splitlines()
    assert repros.splitlines()[1:] == [
        f"  {name}: crashmatrix repro {row.split()[2]} --agent mutant:{name}"
        for name, row in zip(["bare-continue", "resume-finished"], rows, strict=True)]
    assert header.split() == ["mutant", "verdict", "first", "killing", "case", "invariant"]
    assert [r.split()[:2] for r in rows] == [["bare-continue", "killed"], ["resume-finished", "killed"]]
    assert rows[0].split()[-1] == "continuation"


def test_recover_no_lock_is_killed_by_the_second_process_fault_and_by_no_older_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its catalogue scenarios, at their default depth, with every fault but `second`: it survives
    # (with one process at a time, a lock nobody contends changes nothing); then with it: killed.
    name = MutantName.RECOVER_NO_LOCK
    with mutant_runner(name, tmp_path) as (scenarios, runner):
        every = faults_for(runner.adapter)
        assert "second" in [f.name for f in every]
        older = [f for f in every if f.name != "second"]
        monkeypatch.setattr("crashmatrix.harness.execution.matrix.faults_for",
                            lambda adapter, selected=None: older)
        survived = hunt(name, scenarios, runner, jobs=2)
        monkeypatch.undo()
        killed = hunt(name, scenarios, runner, jobs=2)
    assert not survived.killed, survived
    assert survived.cases > 40, "a whole matrix ran"
    assert survived.unjudged == 0
    assert killed.killed
    assert killed.case is not None
    assert killed.case.endswith("/second")
    assert killed.invariant == "one-writer"
    assert killed.repro == f"crashmatrix repro {killed.case} --agent mutant:recover-no-lock"

