"""Fault `second`: a frozen agent, a second process on its session, and nothing left stopped or running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from crashmatrix.harness.adapters.durable import DurableAgentAdapter
from crashmatrix.harness.adapters.interface import PythonEntry
from crashmatrix.harness.cli.matrix_setup import runner_config
from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.execution.incarnation import Incarnation, kill_all
from crashmatrix.harness.execution.runner import CaseRunner
from crashmatrix.harness.execution.spawn import Launch
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.results import Verdict
from crashmatrix.scenarios import load_builtin

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
SCENARIO = load_builtin()["changelog-fast"]
# One case per boundary kind `second` is enumerated at; the first is before the task is in the
# store, so the second process is a `run`, the others a `recover`.
CASES = ["changelog-fast/02:commit.before:run_started.prompt,message.user/second",
         "changelog-fast/06:provider.before:chat/second",
         "changelog-fast/14:effect.before:append_note/second"]

# An agent that waits for a held session instead of refusing it: the second process hangs.
WAITS = """\
import fcntl, os, sys, time
from crashmatrix.agent import cli
args = sys.argv[1:]
lock = os.path.join(args[args.index("--session") + 1], "session.lock")
if os.path.exists(lock):
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        time.sleep(89)
    os.close(fd)
sys.exit(cli.main(args))
"""
WAITS_ADAPTER = f"""\
import sys
from crashmatrix.harness.adapters.durable import DurableAgentAdapter

class Waits(DurableAgentAdapter):
    name = "waits"
    python = None
    program = (sys.executable, "-c", {WAITS!r})

AGENT = Waits()
"""
NO_CONCURRENT = """\
import copy
from crashmatrix.harness.adapters.durable import ADAPTER
from crashmatrix.harness.adapters.interface import Capability

AGENT = copy.copy(ADAPTER)
AGENT.name = "no-second"
AGENT.capabilities = ADAPTER.capabilities - {Capability.CONCURRENT}
"""


class Waits(DurableAgentAdapter):
    name = "waits"
    python: PythonEntry | None = None
    program = (sys.executable, "-c", WAITS)


def _run(case_id: str, agent: str | Waits = "durable-agent", spawn: str = "fork",
         timeout: float = 30.0, work: Path | None = None) -> Observation:
    with runner_config(agent, timeout, False, False, spawn, work=work) as cfg:
        return CaseRunner(cfg).run(Case.parse(case_id), SCENARIO)


def _stopped_or_alive(pids: list[int]) -> list[str]:
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            p = psutil.Process(pid)
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{pid} {p.status()}")
    return out


def _under(root: Path) -> list[str]:
    """Processes working under `root` (a forked agent's cwd is its case directory)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error, OSError):
            if str(root) in p.cwd() or str(root) in " ".join(p.info["cmdline"] or []):
                found.append(f"{p.pid} {p.status()}")
    return found


def _wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize("spawn", ["fork", "fresh"])
@pytest.mark.parametrize("case_id", CASES)
def test_our_agent_refuses_the_second_process_names_the_holder_and_completes(case_id: str,
                                                                             spawn: str) -> None:
    obs = _run(case_id, spawn=spawn)
    [x] = obs.intrusions
    holder = obs.incarnations[0]
    assert (holder.frozen_at, holder.crashed_at, holder.exit_code) == (Case.parse(case_id).schedule[0].n,
                                                                       None, 0)
    assert x.record.intruder
    assert x.record.command == ("run" if "/02:" in case_id else "recover")
    assert x.record.exit_code == 3  # docs/architecture.md: 3 is a session error, "locked" among them
    assert x.record.events == []
    assert f"is locked by pid {x.holder_pid} (" in x.output
    assert x.session_before == x.session_after
    assert "config.json" in x.session_after, "the holder's settings, untouched by the refused one"
    assert x.workspace_before == x.workspace_after
    assert x.requests_after == x.record.requests_before
    result = evaluate(obs, SCENARIO, fsync=False, agent="durable-agent", scenario_dirs=[], duration_ms=0)
    assert result.verdict is Verdict.PASS, result.violations
    assert not result.not_applicable


def test_a_freeze_always_ends_in_a_thaw_or_a_kill(tmp_path: Path) -> None:
    # An agent stopped at a probe event: closing the incarnation without a thaw must not leave
    # it stopped forever; nor may kill_all (an interrupt) when nothing else would end it.
    pids = []
    for end in ("close", "kill_all"):
        launch = Launch(program=(sys.executable, "-c", "import time; time.sleep(60)"), entry=None,
                        args=[], cwd=tmp_path)
        inc = Incarnation(launch)
        pids.append(inc.pid)
        inc.freeze()
        process = psutil.Process(inc.pid)
        _wait_until(lambda: _status(process) == psutil.STATUS_STOPPED, 10, "the agent to stop")  # noqa: B023
        if end == "close":
            inc.close()
        else:
            assert kill_all() >= 1
            inc.close()
        assert inc.proc.poll() is not None, "reaped"
    assert _stopped_or_alive(pids) == []


def test_a_hung_second_process_is_killed_and_the_holder_resumed(tmp_path: Path) -> None:
    started = time.monotonic()
    obs = _run(CASES[1], Waits(), spawn="fresh", timeout=8.0, work=tmp_path)
    assert time.monotonic() - started < 8.0 + 5
    [x] = obs.intrusions
    assert x.record.timed_out
    assert x.record.exit_code is None
    holder = obs.incarnations[0]
    assert holder.frozen_at == 6
    assert holder.exit_code == 0, "thawed, it ran to its end in the time left"
    result = evaluate(obs, SCENARIO, fsync=False, agent="waits", scenario_dirs=[], duration_ms=0)
    assert result.verdict is Verdict.FAIL
    [v] = [v for v in result.violations if v["invariant"] == "one-writer"]
    assert "never ended (killed at its deadline)" in v["message"]
    assert _under(tmp_path) == []


def test_an_interrupt_while_an_agent_is_frozen_leaves_nothing_stopped_or_running(tmp_path: Path) -> None:
    (tmp_path / "waits.py").write_text(WAITS_ADAPTER)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with (tmp_path / "stderr").open("wb") as stderr:
        proc = subprocess.Popen(
            [*CLI, "repro", CASES[2], "--agent", "waits:AGENT", "--timeout", "120"], cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=stderr,
            env={**os.environ, "CRASHMATRIX_TMPDIR": str(scratch)})
    seen: list[psutil.Process] = []
    try:
        def frozen() -> bool:
            with contextlib.suppress(psutil.Error):
                seen[:] = psutil.Process(proc.pid).children(recursive=True)
            return any(_status(p) == psutil.STATUS_STOPPED for p in seen) and len(seen) >= 2
        _wait_until(frozen, 60, "a frozen agent beside a hung second process")
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=30)  # measured under a load average of 14 on 2 cores: < 5 s
        except subprocess.TimeoutExpired:
            pytest.fail(f"no exit within 30 s of SIGINT: {_states(proc.pid, seen)}; stderr: "
                        f"{(tmp_path / 'stderr').read_text()[-2000:]}")
        assert code == 3, (tmp_path / "stderr").read_text()
        _wait_until(lambda: _stopped_or_alive([p.pid for p in seen]) == [], 10,
                    "the frozen agent and the second process to be gone")
        assert _under(scratch) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for p in seen:
            with contextlib.suppress(psutil.Error):
                p.kill()


def _states(pid: int, seen: list[psutil.Process]) -> str:
    """Where the harness waits and what its agents are doing: what a hang's report needs."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        wchan = "?"
    agents = ", ".join(f"{p.pid} {_status(p) or 'gone'}" for p in seen)
    return f"harness {pid} {_status(psutil.Process(pid))} in {wchan}; agents {agents}"


def _status(p: psutil.Process) -> str:
    try:
        return str(p.status())
    except psutil.Error:
        return ""


def test_an_agent_that_does_not_declare_concurrent_is_never_given_a_second_process(tmp_path: Path) -> None:
    (tmp_path / "nosecond.py").write_text(NO_CONCURRENT)
    proc = subprocess.run([*CLI, "repro", CASES[1], "--agent", "nosecond:AGENT"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "fault 'second' needs concurrent, which agent 'no-second' does not declare" in proc.stderr
    listed = subprocess.run([*CLI, "list", "--cases", "--scenario", "changelog-fast", "--agent",
                             "nosecond:AGENT"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, check=True).stdout.splitlines()
    ours = subprocess.run([*CLI, "list", "--cases", "--scenario", "changelog-fast"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=True).stdout.splitlines()
    assert [c for c in listed if c.endswith("/second")] == []
    second = [c for c in ours if c.endswith("/second")]
    assert set(CASES) <= set(second)
    assert {c.split(":")[1] for c in second} == {"commit.before", "effect.before", "provider.before"}
    assert sorted(listed) == sorted(c for c in ours if not c.endswith("/second"))
