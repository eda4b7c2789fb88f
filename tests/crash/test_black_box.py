"""Black-box mode end to end: strace kills agents at their store calls, with no probes running."""

from __future__ import annotations

import json
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
# The baseline is killed as it enters the write of append_note's result: the line is in the file,
# its result is not, and the restart (which has only the chat history) asks and appends again.
BASELINE_DOUBLE = f"{SCENARIO}/b03:write:messages.jsonl/kill"


def crashmatrix(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False)


def results(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def black_box_run(out: Path, *extra: str) -> list[dict[str, Any]]:
    proc = crashmatrix("run", "--black-box", "--scenario", SCENARIO, "--out", str(out), *extra)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return results(out)


def test_our_agent_without_probes_holds_at_every_write_and_sync_of_its_store(tmp_path: Path) -> None:
    found = black_box_run(tmp_path / "o")
    crashes = [r for r in found if r["depth"] == 1]
    # Every crash point is a store call; the recording was made with fsync on (the default here).
    assert crashes
    assert all("/b" in r["case"] for r in crashes)
    points = {r["case"].split("/", 1)[1].split(":")[1] for r in crashes}
    assert {"write", "fsync"} <= points, points
    assert {r["verdict"] for r in found} == {"pass"}, [(r["case"], r["verdict"], r["note"]) for r in found]
    # Killed by strace, as it entered the call: a SIGKILL exit, and no probe event anywhere.
    assert {r["exit_codes"][0] for r in crashes} == {-9}
    assert all(not events for r in found for events in r["trace"])
    assert all(r["crashed_at"] == [None] * len(r["crashed_at"]) for r in found)
    recording = next(r for r in found if r["depth"] == 0)
    assert recording["store_calls"][0], "the recording lists the store calls it saw"
    run = json.loads((tmp_path / "o" / "run.json").read_text(encoding="utf-8"))
    assert run["blackbox"] is True
    assert run["fsync"] is True


def test_the_baseline_doubles_its_effect_and_repro_shows_it_again(tmp_path: Path) -> None:
    found = {r["case"]: r for r in black_box_run(tmp_path / "o", "--agent", "messages-only")}
    double = found[BASELINE_DOUBLE]
    assert double["verdict"] == "fail"
    assert "at-most-once" in {v["invariant"] for v in double["violations"]}
    assert double["repro"] == f"crashmatrix repro {BASELINE_DOUBLE} --agent messages-only"
    # Our agent's rules are what the baseline lacks: the same kill is held by ours (above).
    proc = crashmatrix("repro", BASELINE_DOUBLE, "--agent", "messages-only")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "XX SIGKILL entering write 3 of messages.jsonl" in proc.stdout
    assert "at-most-once: call call_0 (append_note) took effect 2 times" in proc.stdout


def test_two_black_box_runs_give_the_same_cases_and_verdicts_whatever_the_jobs(tmp_path: Path) -> None:
    one = black_box_run(tmp_path / "a", "--agent", "messages-only", "--jobs", "1")
    two = black_box_run(tmp_path / "b", "--agent", "messages-only", "--jobs", "2")

    def verdicts(rs: list[dict[str, Any]]) -> dict[str, tuple[str, list[str]]]:
        return {r["case"]: (r["verdict"], sorted({v["invariant"] for v in r["violations"]})) for r in rs}

    assert verdicts(one) == verdicts(two)


def test_an_agent_without_a_file_store_is_refused_with_exit_2(tmp_path: Path) -> None:
    toy = Path(__file__).resolve().parents[2] / "examples" / "toy_agent"
    argv = ["run", "--black-box", "--agent", "toyagent.adapter:AGENT", "--scenario", SCENARIO, "--out",
            str(tmp_path / "o")]
    proc = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=60, check=False, cwd=toy)
    assert proc.returncode == 2, proc.stderr
    assert "agent 'toy' does not declare 'file-store'" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_scenario_that_delivers_at_probe_events_is_refused_when_named(tmp_path: Path) -> None:
    proc = crashmatrix("run", "--black-box", "--scenario", "queued-input", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2, proc.stderr
    assert "scenario queued-input delivers inputs or cancels at probe events" in proc.stderr


def test_black_box_without_strace_is_exit_3_saying_what_to_install(tmp_path: Path) -> None:
    env = {"PATH": str(Path(sys.executable).parent)}  # the interpreter, and no strace
    proc = subprocess.run([*CLI, "run", "--black-box", "--scenario", SCENARIO, "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=60, check=False, env=env)
    assert proc.returncode == 3, proc.stderr
    assert "--black-box: file-system calls are observed with strace" in proc.stderr
    assert "apt-get install strace" in proc.stderr
