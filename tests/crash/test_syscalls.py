"""System-call points with probes on (`run --syscalls`): real kills at store calls, every invariant judged."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.crash,
              pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")]
CLI = [sys.executable, "-m", "crashmatrix"]
SCENARIO = "changelog-fast"
MUTANT = "mutant:compacts-log-in-place"


def crashmatrix(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


def run(out: Path, *extra: str) -> tuple[int, list[dict[str, Any]]]:
    proc = crashmatrix("run", "--scenario", SCENARIO, "--out", str(out), *extra)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return proc.returncode, [json.loads(line) for line in lines]


def invariants(result: dict[str, Any]) -> list[str]:
    return [v["invariant"] for v in result["violations"]]


def at_calls(result: dict[str, Any]) -> list[str]:
    """The system-call steps of a result's case id (`sNN:syscall:file/fault`, and a settle's
    `fNN:syscall:file/fault`)."""
    return [t for t in result["case"].split("/", 1)[1].split("+") if t[:1] in ("s", "f")]


def settles(result: dict[str, Any]) -> bool:
    """Whether the case crashes its settle (its last step is `fNN`)."""
    return result["case"].split("/", 1)[1].split("+")[-1].startswith("f")


def test_our_agent_holds_at_every_system_call_point_and_the_old_cases_keep_their_verdicts(
        tmp_path: Path) -> None:
    _, before = run(tmp_path / "default")
    code, found = run(tmp_path / "syscalls", "--syscalls")
    assert code == 0, [(r["case"], invariants(r)) for r in found if r["verdict"] != "pass"]
    new = [r for r in found if at_calls(r)]
    assert new, "the recording's calls between events became cases"
    # The default matrix is a subset, case for case, with the same verdicts and invariants.
    by_case = {r["case"]: r for r in found}
    assert {r["case"] for r in before} == set(by_case) - {r["case"] for r in new}
    assert [(r["verdict"], invariants(r)) for r in before] == [
        (by_case[r["case"]]["verdict"], invariants(by_case[r["case"]])) for r in before]
    for r in new:
        # Killed by strace entering the call, with its probe events read up to there: the first
        # incarnation, or (a settle step) the settle after it finished the task uncrashed.
        killed = 1 if settles(r) else 0
        assert r["exit_codes"][:killed + 1] == [0] * killed + [-9], r["case"]
        assert r["crashed_at"][killed] is None
        assert r["verdict"] == "pass"
        assert len(r["exit_codes"]) == 3  # then the recovery (or settle) and the settle
    recording = next(r for r in found if r["depth"] == 0)
    listed, settle = recording["syscall_points"][:2]
    # Calls a probe event's kill already stands for are listed, marked, and no case; a settle's
    # events are no crash points, so each of its calls is one (its lock's, for our agent).
    assert any(p.startswith("=") for p in listed)
    assert len(new) == sum(1 for p in listed if p[0] not in "=~!") + sum(1 for p in settle if p[0] != "!")
    assert {t for r in new if settles(r) for t in at_calls(r)} == {"f01:ftruncate:session.lock/kill",
                                                                  "f01:pwrite64:session.lock/kill",
                                                                  "f02:ftruncate:session.lock/kill"}
    assert json.loads((tmp_path / "syscalls" / "run.json").read_text(encoding="utf-8"))["syscalls"] is True


def test_our_agent_holds_at_the_system_calls_of_its_recoveries_and_settles(tmp_path: Path) -> None:
    # With --states: a settle to be traced runs even where an equal final state was settled.
    code, found = run(tmp_path / "o", "--syscalls", "--depth", "2", "--shard", "1/16", "--states")
    assert code == 0, [(r["case"], invariants(r)) for r in found if r["verdict"] != "pass"]
    deeper = [r for r in found if r["depth"] == 2 and at_calls(r)]
    assert deeper, "each single crash's recovery was traced for its own calls"
    # The recovery's calls: the session lock's, before its first event, among them.
    assert any(t.endswith(":session.lock/kill") for r in deeper for t in at_calls(r))
    # Every single crash's settle was traced, whatever state it settled: each has settle cases.
    parents = {r["case"] for r in found if r["depth"] == 1 and not settles(r)}
    assert parents
    assert {r["case"].rsplit("+", 1)[0] for r in deeper if settles(r)} == parents


def test_a_log_compacted_in_place_is_caught_only_at_a_restart_s_system_call(tmp_path: Path) -> None:
    # Depth 1: only the settle's calls (the settle compacts too); every event case and every call
    # of the recording holds.
    code, found = run(tmp_path / "first", "--agent", MUTANT, "--syscalls")
    failed = [r for r in found if r["verdict"] == "fail"]
    assert code == 1
    assert {at_calls(r)[-1] for r in failed} == {"f01:write:session.jsonl/kill"}, [r["case"] for r in failed]
    assert [r["case"] for r in found if r["verdict"] != "pass" and not settles(r)] == []
    # Depth 2: a recovery killed between the log's truncate and its rewrite, its parent held.
    parent = f"{SCENARIO}/04:commit.after:run_started.prompt,message.user/kill"
    killed = f"{parent}+s01:write:session.jsonl/kill"
    code, pair = run(tmp_path / "deep", "--agent", MUTANT, "--syscalls", "--depth", "2",
                     "--case", parent, "--case", killed)
    by_case = {r["case"]: r for r in pair}
    assert code == 1
    assert (by_case[parent]["verdict"], by_case[killed]["verdict"]) == ("pass", "fail")
    killer = by_case[killed]
    # Judged from probe events (commits acknowledged at inc1#N): the probes stayed attached.
    assert "durable-commits" in invariants(killer)
    assert killer["trace"][0], killer["case"]
    replay = crashmatrix(*shlex.split(killer["repro"])[1:])
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "durable-commits" in replay.stdout
    assert run(tmp_path / "blind", "--agent", MUTANT, "--black-box")[0] == 0


def test_a_finished_log_tidied_in_place_is_caught_only_at_a_settle_s_system_call(tmp_path: Path) -> None:
    agent = "mutant:tidies-finished-log"
    code, found = run(tmp_path / "first", "--agent", agent, "--syscalls")
    failed = [r for r in found if r["verdict"] == "fail"]
    assert code == 1
    # Only a start after a clean finish tidies (at depth 1: the settle): every failing case
    # crashed the settle between the log's truncate and its rewrite; every other case (events,
    # the recording's system calls) holds.
    assert {at_calls(r)[-1] for r in failed} == {"f01:write:session.jsonl/kill"}
    assert [r["case"] for r in found if r["verdict"] != "pass" and not settles(r)] == []
    assert any(at_calls(r) and not settles(r) for r in found)
    replay = crashmatrix(*shlex.split(failed[0]["repro"])[1:])
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "SIGKILL entering write 1 (on session.jsonl) (strace)" in replay.stdout
    assert "-- incarnation 2 (settle, crashed;" in replay.stdout
    assert run(tmp_path / "blind", "--agent", agent, "--black-box")[0] == 0


def test_syscalls_are_refused_with_black_box_and_for_a_fault_that_cannot_act_at_a_call(
        tmp_path: Path) -> None:
    both = crashmatrix("run", "--scenario", SCENARIO, "--syscalls", "--black-box",
                       "--out", str(tmp_path / "a"))
    assert both.returncode == 2
    assert "--syscalls with --black-box" in both.stderr
    torn = crashmatrix("run", "--scenario", SCENARIO, "--syscalls", "--fault", "torn",
                       "--out", str(tmp_path / "b"))
    assert torn.returncode == 2
    assert "none of the selected faults can act at a system call" in torn.stderr
    assert not (tmp_path / "a").exists()
    assert not (tmp_path / "b").exists()


def test_our_agent_holds_a_power_loss_at_every_system_call_point(tmp_path: Path) -> None:
    code, found = run(tmp_path / "o", "--syscalls", "--fault", "power", "--fault", "kill")
    assert code == 0, [(r["case"], invariants(r)) for r in found if r["verdict"] != "pass"]
    powered = [r for r in found if at_calls(r) and r["case"].endswith("/power")]
    assert powered
    # A power loss at a call between events undoes what was not synced: the settings file's
    # rename, whose folder was not synced yet, among them.
    replay = crashmatrix("repro", f"{SCENARIO}/s01:rename:config.tmp/power")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "SIGKILL entering rename 1 (on config.tmp) (strace)" in replay.stdout
    assert "config.tmp: gone (its name was never synced to its folder)" in replay.stdout


def test_a_rename_synced_before_its_data_is_caught_only_by_a_power_loss_at_a_restart_s_call(
        tmp_path: Path) -> None:
    agent = "mutant:renames-before-sync"
    code, found = run(tmp_path / "first", "--agent", agent, "--syscalls", "--fault", "power")
    failed = [r for r in found if r["verdict"] == "fail"]
    assert code == 1
    # The log's name is durable, its bytes are not: only between the folder's sync and the file's,
    # at depth 1 in the settle (it compacts too); every other case holds.
    assert {at_calls(r)[-1] for r in failed} == {"f02:fsync:session.jsonl/power"}, [r["case"] for r in failed]
    assert [r["case"] for r in found if r["verdict"] != "pass" and not settles(r)] == []
    # At a recovery's call: the power loss fails, a kill at the same call after the same crash
    # keeps the page cache and holds. (That a power loss at events comes after the file's sync is
    # measured: `--fault power --depth 2`.)
    parent = f"{SCENARIO}/04:commit.after:run_started.prompt,message.user"
    powered = f"{parent}/power+s02:fsync:session.jsonl/power"
    killed = f"{parent}/kill+s02:fsync:session.jsonl/kill"
    code, pair = run(tmp_path / "pair", "--agent", agent, "--syscalls", "--fault", "power", "--fault", "kill",
                     "--depth", "2", "--case", f"{parent}/power", "--case", powered,
                     "--case", f"{parent}/kill", "--case", killed)
    verdicts = {r["case"]: r["verdict"] for r in pair}
    assert code == 1
    assert (verdicts[powered], verdicts[killed]) == ("fail", "pass"), verdicts
    replay = crashmatrix(*shlex.split(next(r["repro"] for r in pair if r["case"] == powered))[1:])
    assert replay.returncode == 1, replay.stdout + replay.stderr
