"""The mutant hunt's plumbing: deterministic first kill, levels, the adapter and the launcher."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crashmatrix.harness.adapters.durable import DurableAgentAdapter, LaunchSpec
from crashmatrix.harness.adapters.mutant import MutantAdapter
from crashmatrix.harness.execution.hunt import Hunt, next_level
from crashmatrix.harness.execution.ordered import first_failure, run_until_failure
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.torn import TORN
from crashmatrix.harness.mutants.catalogue import MutantName
from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.scenarios import load_builtin

FAULTS = (KILL, TORN)


def _result(case: Case, verdict: Verdict, trace: list[list[str]] | None = None) -> CaseResult:
    return CaseResult(case=case.case_id, scenario=case.scenario, depth=case.depth, verdict=verdict,
                      trace=trace or [])


def _never() -> None:
    raise AssertionError("no interrupt expected")


def test_the_first_failure_is_in_enumeration_order_not_completion_order() -> None:
    cases = [Case(f"s{i}") for i in range(8)]
    started: list[int] = []
    lock = threading.Lock()

    def run(case: Case) -> CaseResult:
        index = int(case.scenario[1:])
        with lock:
            started.append(index)
        # Case 1 fails slowly, case 2 fails at once: case 1 is still the first failure.
        time.sleep(0.2 if index == 1 else 0.0)
        return _result(case, Verdict.FAIL if index in (1, 2, 5) else Verdict.PASS)

    results = run_until_failure(run, cases, 2, _never)
    killer = first_failure(results)
    assert killer is not None
    assert killer.case == "s1/none"
    assert [r.verdict if r else None for r in results[:2]] == [Verdict.PASS, Verdict.FAIL]
    assert max(started) < 5, "cases after a known failure are not started"


def test_without_a_failure_every_case_runs() -> None:
    cases = [Case(f"s{i}") for i in range(5)]
    results = run_until_failure(lambda c: _result(c, Verdict.PASS), cases, 3, _never)
    assert all(r is not None for r in results)
    assert first_failure(results) is None


def test_levels_go_recording_then_single_crashes_then_crash_loops() -> None:
    builtins = load_builtin()
    recording = Case("budget")
    trace = [["commit.before:x", "commit.written:x", "inbox.poll:inbox"], []]
    singles = next_level([recording], [_result(recording, Verdict.PASS, trace)], builtins, FAULTS)
    assert [c.case_id for c in singles] == [
        "budget/01:commit.before:x/kill", "budget/02:commit.written:x/kill",
        "budget/02:commit.written:x/torn", "budget/03:inbox.poll:inbox/kill"]
    crashed = singles[-1]
    again = [["inbox.poll:inbox"], ["provider.before:chat", "inbox.poll:inbox"], []]
    loops = next_level([crashed, singles[0]],
                       [_result(crashed, Verdict.PASS, again), None], builtins, FAULTS)
    assert loops == [crashed.extend(CrashStep(2, "inbox.poll", "inbox"))]
    # finished has crash_loop = 1: its crashes are not repeated.
    single = Case("finished", (CrashStep(1, "inbox.poll", "inbox"),))
    assert next_level([single], [_result(single, Verdict.PASS, again)], builtins, FAULTS) == []


def test_a_hunt_reports_the_five_json_fields() -> None:
    hunt = Hunt(MutantName.RERUN_NEVER, True, "changelog-fast/12:x:y/kill", "safe-rerun", 17,
                repro="crashmatrix repro changelog-fast/12:x:y/kill --agent mutant:rerun-never")
    assert hunt.to_json() == {"mutant": "rerun-never", "killed": True,
                              "case": "changelog-fast/12:x:y/kill", "invariant": "safe-rerun",
                              "repro": "crashmatrix repro changelog-fast/12:x:y/kill "
                                       "--agent mutant:rerun-never"}


def test_the_adapter_is_the_durable_agents_started_through_the_launcher(tmp_path: Path) -> None:
    spec = LaunchSpec(session=tmp_path / "s", workspace=tmp_path / "w", provider_url="http://x/v1",
                      tools=["read"], policies={"read": "never"}, resume_budget=2, max_retries=1,
                      retry_delay_s=0.0, provider_timeout_s=5.0, fsync=False)
    adapter, plain = MutantAdapter(MutantName.VOLATILE_STOP), DurableAgentAdapter()
    assert adapter.name == "mutant:volatile-stop"
    launch = "crashmatrix.harness.mutants.launch"
    assert adapter.python is not None
    assert plain.python is not None
    assert (adapter.python.module, adapter.python.entry) == (launch, f"{launch}:main")
    assert adapter.python.preload == (*plain.python.preload, launch)
    assert adapter.program[1:] == ("-m", launch)
    assert adapter.start_args(spec, "t") == ["volatile-stop", *plain.start_args(spec, "t")]
    assert adapter.recover_args(spec) == ["volatile-stop", *plain.recover_args(spec)]
    assert adapter.declared_branches() == plain.declared_branches()


@pytest.mark.parametrize(("args", "code", "out"), [
    (["rerun-never", "--session", "{tmp}", "tools"], 0, "append_note"),
    (["nope", "tools"], 2, "unknown mutant 'nope'"),
    ([], 2, "usage: python -m crashmatrix.harness.mutants.launch MUTANT"),
])
def test_the_launcher_applies_a_named_mutant_then_runs_the_agent_cli(
        tmp_path: Path, args: list[str], code: int, out: str) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    proc = subprocess.run([sys.executable, "-m", "crashmatrix.harness.mutants.launch", *argv],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == code, proc.stderr
    assert out in proc.stdout + proc.stderr
