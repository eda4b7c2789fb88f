"""Fault `power`: observed under strace, files set as a power loss leaves them; holds with fsync, not off."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from crashmatrix.harness.adapters.durable import ADAPTER
from crashmatrix.harness.adapters.interface import LaunchSpec
from crashmatrix.harness.execution.hunt import hunt
from crashmatrix.harness.execution.incarnation import Incarnation, IncarnationTimeout, kill_all
from crashmatrix.harness.execution.observed import TracedProcess, TracedSpawner
from crashmatrix.harness.execution.spawn import Launch
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from tests.support.mutant_hunt import mutant_runner

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
POWER = ["--scenario", "changelog-fast", "--fault", "power"]
# Where the first incarnation's commit of the append_note intent is acknowledged.
ACKED = "changelog-fast/13:commit.after:tool_started.append_note/power"


def crashmatrix(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


def test_the_power_matrix_holds_on_our_agent_with_fsync_on_by_default(tmp_path: Path) -> None:
    proc = crashmatrix("run", *POWER, "--json", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["faults"] == ["power"]
    # Both boundaries of each of the 8 commits, and the recording.
    assert summary["cases"] == 17
    assert summary["failed"] == 0
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (run["fsync"], run["faults"]) == (True, ["power"])


def test_power_holds_where_the_harness_delivers_into_the_inbox_while_the_agent_runs(tmp_path: Path) -> None:
    # The inbox the harness creates mid-incarnation is another process's directory to the power
    # model: it was an IsADirectoryError (verdict `error`), then "gone with its folder" (issue 33, P1).
    proc = crashmatrix("run", "--scenario", "queued-input", "--scenario", "cancel", "--fault", "power",
                       "--fault", "power-keep1", "--json", "--out", str(tmp_path / "out"), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["cases"] > 50
    assert summary["failed"] == 0


def test_with_fsync_off_it_fails_naming_durable_commits_and_saying_fsync_was_off(tmp_path: Path) -> None:
    proc = crashmatrix("run", *POWER, "--fsync", "off", "--json", "--out", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    failed = {f["case"]: f for f in summary["failures"]}
    assert ACKED in failed
    assert "durable-commits" in failed[ACKED]["invariants"]
    assert failed[ACKED]["repro"] == f"crashmatrix repro {ACKED} --fsync off"
    results = {json.loads(line)["case"]: json.loads(line)
               for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()}
    assert "the agent ran with --fsync off" in results[ACKED]["note"]
    # Its repro, as printed, reproduces it: no --fault needed (the id names the fault).
    again = crashmatrix(*failed[ACKED]["repro"].split()[1:])
    assert again.returncode == 1, again.stdout + again.stderr
    assert "durable-commits" in again.stdout
    assert "XX power loss with --fsync off" in again.stdout
    assert "XX session/session.jsonl:" in again.stdout  # what the power loss did to the log


def test_a_power_case_repro_holds_and_shows_what_the_power_loss_did() -> None:
    proc = crashmatrix("repro", "changelog-fast/12:commit.written:tool_started.append_note/power")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The unacknowledged commit's bytes were written, not synced: the power loss takes them.
    assert "XX session/session.jsonl: cut back to" in proc.stdout
    assert "(observed by strace)" in proc.stdout


def test_power_keep1_keeps_the_unacknowledged_log_write_that_power_takes() -> None:
    # Killed with the commit of the append_note intent written, not synced. Before, keep1 kept the
    # first unsynced write of the incarnation, always the lock's holder record, and cut the log
    # back exactly as `power` does.
    at = "changelog-fast/12:commit.written:tool_started.append_note"
    power, keep1 = crashmatrix("repro", f"{at}/power"), crashmatrix("repro", f"{at}/power-keep1")
    assert power.returncode == 0, power.stdout + power.stderr
    assert keep1.returncode == 0, keep1.stdout + keep1.stderr
    assert re.search(r"XX session/session\.jsonl: cut back to \d+ of (\d+) bytes", power.stdout)
    kept = re.search(r"XX session/session\.jsonl: kept (\d+) of (\d+) bytes \((\d+) unsynced kept\)",
                     keep1.stdout)
    assert kept is not None, keep1.stdout
    assert kept[1] == kept[2], "the whole commit line reached the disk"
    assert "session.lock: kept" not in keep1.stdout
    # Recovery then finds the intent the power loss took in `power`: a call never answered.
    assert "recovery.branch:call.unknown_recorded_never" in keep1.stdout
    assert "recovery.branch:call.unknown_recorded_never" not in power.stdout


def test_a_first_incarnation_power_loss_keeps_config_json_and_recovery_is_given_no_workspace() -> None:
    # Recovery is launched without --workspace: it works from what the session holds. Before,
    # config.json was renamed into place unsynced: gone with the power, and the recovery ran in
    # its working directory (the case's), not the workspace: the append went elsewhere.
    spec = LaunchSpec(session=Path("/c/session"), workspace=Path("/c/ws"), provider_url="http://p/v1",
                      tools=("read",), policies={}, resume_budget=3, max_retries=3, retry_delay_s=0.1,
                      provider_timeout_s=5.0, fsync=True)
    assert "--workspace" not in ADAPTER.recover_args(spec)
    assert "--workspace" in ADAPTER.start_args(spec, "task")
    proc = crashmatrix("repro", "changelog-fast/04:commit.after:run_started.prompt,message.user/power")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.split("-- incarnation 2")[0]
    assert "XX SIGKILL here (observed by strace)" in first
    assert "config.json" not in first, first  # nothing to say: it was synced, name and bytes
    assert "every invariant held" in proc.stdout


def test_power_is_refused_for_an_agent_that_does_not_declare_a_file_store() -> None:
    toy = Path(__file__).resolve().parents[2] / "examples" / "toy_agent"  # it declares only `kill`
    argv = [*CLI, "run", *POWER, "--agent", "toyagent.adapter:AGENT", "--out", "/nonexistent/x"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, cwd=toy)
    assert proc.returncode == 2
    assert "--fault power: needs file-store, which agent 'toy' does not declare" in proc.stderr


def test_a_missing_strace_is_exit_3_saying_what_to_install(tmp_path: Path) -> None:
    env = {"PATH": str(Path(sys.executable).parent)}  # the interpreter, and no strace
    proc = subprocess.run([*CLI, "run", *POWER, "--out", str(tmp_path / "o")], capture_output=True,
                          text=True, timeout=60, check=False, env=env)
    assert proc.returncode == 3, proc.stderr
    assert "apt-get install strace" in proc.stderr


def test_never_syncs_survives_the_default_faults_and_is_killed_by_power(tmp_path: Path) -> None:
    name = MutantName.NEVER_SYNCS
    assert CATALOGUE[name].faults == ("power",)
    with mutant_runner(name, tmp_path, fsync=True) as (scenarios, config):
        survived = hunt(name, scenarios, config, jobs=2)  # kill, second, torn
        killed = hunt(name, scenarios, config, jobs=2, faults=("power",))
    assert not survived.killed, survived
    assert survived.cases > 40, "a whole matrix ran"
    assert survived.unjudged == 0
    assert killed.killed
    assert killed.case == "changelog-fast/04:commit.after:run_started.prompt,message.user/power"
    assert killed.invariant == "durable-commits"
    assert killed.repro == f"crashmatrix repro {killed.case} --agent mutant:never-syncs"


HANGS = [sys.executable, "-c", "import time; time.sleep(60)"]


def traced_hanger(tmp_path: Path) -> tuple[Incarnation, TracedProcess]:
    launch = Launch(program=tuple(HANGS), entry=None, args=[], cwd=tmp_path, env=dict(os.environ))
    inc = Incarnation(launch, TracedSpawner(tmp_path / "trace"))
    assert isinstance(inc.proc, TracedProcess)
    return inc, inc.proc


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_hung_traced_agent_at_the_deadline_is_killed_and_strace_reaped(tmp_path: Path) -> None:
    inc, traced = traced_hanger(tmp_path)
    with inc:
        agent = inc.pid
        assert agent != traced.tracer.pid  # the agent, in a group of its own, not strace
        with pytest.raises(IncarnationTimeout):
            inc.next_event(time.monotonic() + 0.5)
        inc.kill()
        assert traced.tracer.returncode is not None  # strace reaped
        assert gone(agent)
    assert (tmp_path / "trace").exists()


def test_an_interrupt_kills_a_traced_agent_and_reaps_strace(tmp_path: Path) -> None:
    inc, traced = traced_hanger(tmp_path)
    with inc:
        agent = inc.pid
        assert kill_all() >= 1  # what SIGINT and SIGTERM do to every live incarnation
        assert traced.tracer.returncode is not None
        assert gone(agent)
