"""`crashmatrix explore` end to end: nothing on the correct agent; mutants found, shrunk, replayed."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from crashmatrix.harness.adapters.durable import ENTRY, DurableAgentAdapter
from crashmatrix.harness.adapters.interface import PythonEntry
from crashmatrix.harness.execution.runner import CaseRunner, RunnerConfig
from crashmatrix.harness.execution.spawn import SpawnMode
from crashmatrix.harness.execution.spawners import make_spawner
from crashmatrix.harness.explore import read_repro, run_repro
from crashmatrix.harness.explore.agents import resolve_adapter
from crashmatrix.harness.explore.repro import Repro, repro_data, write_repro
from crashmatrix.harness.explore.search import SearchConfig, search
from crashmatrix.harness.explore.strategies import examples
from crashmatrix.harness.explore.trial import CaseCache

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
MARKER = "CRASHMATRIX_EXPLORE_TEST"


def leftovers(marker: str) -> list[str]:
    """Live processes that inherited the marker from the run (zygote, agents, their commands)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if p.pid != os.getpid() and p.environ().get(MARKER) == marker:
                found.append(f"{p.pid}: {' '.join(p.info['cmdline'] or [])[:120]}")
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return found


def crashmatrix(*args: str, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess[str], str]:
    marker = uuid.uuid4().hex
    env = {**os.environ, MARKER: marker}
    env.pop("CI", None)
    proc = subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=900,
                          check=False, cwd=cwd, stdin=subprocess.DEVNULL)
    return proc, marker


def run_explore(*args: str, out: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    return crashmatrix("explore", *args, "--out", str(out))


@pytest.fixture
def config(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A runner config factory for in-process replays; every process it starts is reaped."""
    from crashmatrix.fakes import FakeProvider  # noqa: PLC0415 - only these tests start a provider

    marker = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, marker)
    spawners = []

    def make(adapter: Any, work: Path) -> RunnerConfig:
        spawner = make_spawner(SpawnMode.FORK, list(adapter.python.preload) if adapter.python else None)
        spawners.append(spawner)
        return RunnerConfig(adapter=adapter, provider=provider, work_root=work, spawner=spawner)

    with FakeProvider() as provider:
        yield make
        for s in spawners:
            s.close()
    assert leftovers(marker) == []


def replay(path: Path, make: Any, tmp: Path, adapter: Any = None) -> tuple[str, list[str]]:
    repro = read_repro(path)
    cfg = make(adapter or resolve_adapter(repro.agent, repro.mutant), tmp)
    _, result = run_repro(repro, cfg)
    return result.verdict.value, result.invariants


def test_explore_finds_nothing_on_the_correct_agent(tmp_path: Path) -> None:
    proc, marker = run_explore("--examples", "12", "--seed", "0", "--json", out=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["found"] is None
    assert summary["examples"] >= 6
    assert summary["cases"] >= summary["examples"]
    assert leftovers(marker) == []
    assert not list(tmp_path.glob("*.json")), "no failure, no repro file"


@pytest.mark.parametrize("mutant", ["rerun-never", "resume-finished"])
def test_explore_shrinks_a_mutant_and_the_printed_command_reproduces_it(
        tmp_path: Path, mutant: str) -> None:
    proc, marker = run_explore("--mutant", mutant, "--examples", "40", "--seed", "1", out=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert leftovers(marker) == []
    commands = [line.removeprefix("reproduce: ") for line in proc.stdout.splitlines()
                if line.startswith("reproduce: ")]
    assert len(commands) == 1, proc.stdout
    argv = shlex.split(commands[0])
    assert argv[:3] == ["crashmatrix", "repro", "--file"]
    path = Path(argv[3])
    repro = read_repro(path)
    assert repro.mutant == mutant
    found = json.loads(path.read_text(encoding="utf-8"))["found"]
    assert found["calls"] <= 2, proc.stdout
    assert found["crashes"] == repro.case.depth <= 1, proc.stdout
    assert f"minimal case: {repro.case.case_id}" in proc.stdout
    assert found["verdict"] == "fail"
    assert found["invariants"]
    # The printed command, exactly as printed, replays the same failure.
    replayed, marker = crashmatrix(*argv[1:])
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert replayed.stdout.startswith(f"case {repro.case.case_id}: FAIL")
    violated = replayed.stdout.split("-- violated", 1)[1]
    assert sorted({v for v in found["invariants"] if f"   {v}: " in violated}) == found["invariants"]
    assert leftovers(marker) == []


SUPPORT = Path(__file__).resolve().parents[2] / "examples" / "support_app"


def test_explore_runs_against_a_users_app_on_its_own_scenarios(tmp_path: Path) -> None:
    """Issue 34, item 6: an app with its own tools (lookup_order, send_email) cannot run the
    generated scenarios; explore says so, and on the app's own scenario, as written, draws crash
    schedules, finds the doubled email, and its printed command replays it."""
    broken = "langgraph:support_lg.broken:build"
    refused, _ = crashmatrix("explore", "--agent", broken, "--out", str(tmp_path), cwd=SUPPORT)
    assert refused.returncode == 2, refused.stderr
    assert ("cannot run the generated scenarios (their tools are read, append_note, write, bash)"
            in refused.stderr)
    assert "--scenarios DIR" in refused.stderr
    proc, marker = crashmatrix("explore", "--agent", broken, "--scenarios", "scenarios",
                               "--scenario", "refund", "--examples", "40", "--seed", "2", "--json",
                               "--out", str(tmp_path), cwd=SUPPORT)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert leftovers(marker) == []
    summary = json.loads(proc.stdout)
    assert summary["explored"] == "crash schedules of refund"
    found = summary["found"]
    assert "at-most-once" in found["invariants"]
    assert found["case"].startswith("refund/")
    repro = read_repro(found["file"])
    assert repro.agent == broken, "the app's own reference, so the file replays it"
    assert repro.scenario.expect.records, "the scenario's own oracle travels with it"
    replayed, marker = crashmatrix(*shlex.split(found["repro"])[1:], cwd=SUPPORT)
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert replayed.stdout.startswith(f"case {found['case']}: FAIL")
    assert "   at-most-once: " in replayed.stdout
    assert leftovers(marker) == []


# -- a throwaway mutant, so the Python API is covered whatever harness.mutants holds ----------

def rerun_never_main(argv: list[str]) -> int:
    """The agent, except that recovery re-runs every started call, never-replay ones too."""
    from crashmatrix.agent import cli, recovery  # noqa: PLC0415 - patched in the forked agent only

    correct = recovery.resolve_call

    def rerun(call: Any, current: Any) -> Any:
        if call.started is None:
            return correct(call, current)
        return recovery.CallRepair(call, True, recovery.RecoveryBranch.CALL_RERUN,
                                   args=call.started.get("args"))

    recovery.resolve_call = rerun
    return cli.main(argv)


class RerunNeverAdapter(DurableAgentAdapter):
    name = "test:rerun-never"
    # The zygote imports this module once; importing it in every forked agent costs a second.
    python = PythonEntry(ENTRY.module, f"{__name__}:rerun_never_main", (*ENTRY.preload, __name__))


def test_the_search_api_shrinks_a_failure_and_its_repro_file_replays(
        tmp_path: Path, config: Any) -> None:
    adapter = RerunNeverAdapter()
    with tempfile.TemporaryDirectory(prefix="explore-test-") as work:
        cache = CaseCache(CaseRunner(config(adapter, Path(work))), adapter.name)
        result = search(cache, SearchConfig(examples=30, seed=3), examples())
    finding = result.finding
    assert finding is not None
    assert result.error is None
    assert finding.calls <= 2, finding.variant.describe()
    assert finding.crashes <= 1, finding.case.case_id
    assert "at-most-once" in finding.result.invariants
    path = write_repro(tmp_path / "r.json", repro_data(finding, "durable-agent", None, 3))
    repro = read_repro(path)
    assert isinstance(repro, Repro)
    assert repro.case == finding.case
    assert replay(path, config, tmp_path / "replay", adapter) == (
        finding.result.verdict.value, finding.result.invariants)
    # The same case on the correct agent holds: the failure is the mutant's.
    assert replay(path, config, tmp_path / "correct") == ("pass", [])
