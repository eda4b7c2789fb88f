"""Power losses in the other orders a disk may keep things in (names first, blocks, subsets), end to end."""

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
MUTANT = "mutant:settings-resaved-unsynced"


def crashmatrix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300, check=False)


def run(out: Path, *extra: str, scenario: str = SCENARIO) -> tuple[int, list[dict[str, Any]]]:
    proc = crashmatrix("run", "--scenario", scenario, "--out", str(out), *extra)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return proc.returncode, [json.loads(line) for line in lines]


def test_our_agent_holds_whichever_order_the_disk_kept(tmp_path: Path) -> None:
    code, found = run(tmp_path / "o", "--fault", "power-names", "--syscalls")
    assert code == 0, [(r["case"], r["violations"][:1]) for r in found if r["verdict"] != "pass"]
    assert sum(1 for r in found if r["case"].endswith("/power-names")) > 2


def test_settings_renamed_before_their_bytes_are_caught_only_in_that_order(tmp_path: Path) -> None:
    code, found = run(tmp_path / "names", "--agent", MUTANT, "--fault", "power-names")
    assert code == 1
    failed = [r for r in found if r["verdict"] == "fail"]
    assert failed
    assert all(r["case"].endswith("/power-names") for r in failed)
    replay = crashmatrix(*shlex.split(failed[0]["repro"])[1:])
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "config.json: empty (created by this incarnation, none of its bytes synced)" in replay.stdout
    assert "config.json: not valid JSON" in replay.stdout
    # The strict order undoes the unsynced rename; a kill keeps the page cache.
    assert run(tmp_path / "strict", "--agent", MUTANT, "--fault", "power", "--fault", "power-keep1",
               "--fault", "kill")[0] == 0


def test_a_log_that_kept_its_length_but_not_its_blocks_is_repaired_and_a_scan_that_refuses_it_caught(
        tmp_path: Path) -> None:
    code, found = run(tmp_path / "ours", "--fault", "power-blocks", scenario="large-result")
    assert code == 0, [(r["case"], r["violations"][:1]) for r in found if r["verdict"] != "pass"]
    # The read's result spans the log's first block boundary: the commit that saves it is the hole.
    at = "large-result/17:commit.written:message.tool.read/power-blocks"
    replay = crashmatrix("repro", at)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "with bytes 657 to 4096 zeros (its length reached the disk before those blocks)" in replay.stdout
    assert "recovery.branch:open.torn_tail_repaired" in replay.stdout
    agent = "mutant:holes-taken-for-damage"
    caught, results = run(tmp_path / "mutant", "--agent", agent, "--fault", "power-blocks",
                          scenario="large-result")
    assert caught == 1
    assert [r["case"] for r in results if r["verdict"] == "fail"] == [at]
    assert crashmatrix("repro", at, "--agent", agent).returncode == 1
    assert run(tmp_path / "others", "--agent", agent, "--fault", "power", "--fault", "power-keep1",
               "--fault", "power-names", "--fault", "torn", scenario="large-result")[0] == 0


def test_every_subset_of_the_unsynced_blocks_runs_as_a_sibling_and_a_mask_that_does_not_fit_is_refused(
        tmp_path: Path) -> None:
    code, found = run(tmp_path / "ours", "--fault", "power-subsets")
    assert code == 0, [(r["case"], r["violations"][:1]) for r in found if r["verdict"] != "pass"]
    parents = [r for r in found if r["case"].endswith("/power-subsets")]
    siblings = [r["case"] for r in found if "/power-subsets:" in r["case"]]
    # Each variant a parent offered ran once, as the parent's case with that mask.
    assert sorted(siblings) == sorted(f"{r['case']}:{m}" for r in parents for m in r["variants"])
    assert len(siblings) > len(parents)
    at = f"{SCENARIO}/26:commit.written:tool_started.bash/power-subsets:01"
    assert at in siblings
    replay = crashmatrix("repro", at)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "of its 1 unsynced block(s), those marked 1 in 1 reached the disk" in replay.stdout
    # A mask the run does not fit is never judged on a state it was not meant to reach.
    drifted = crashmatrix("repro", at[:-2] + "0101")
    assert "nondeterministic: power-subsets:0101 does not fit this run" in drifted.stdout
    assert drifted.returncode != 0


def test_a_group_commit_is_caught_only_by_a_subset_that_keeps_a_later_block_of_it(tmp_path: Path) -> None:
    # large-call: the message and the intent of a 6 KiB call span several blocks of the log.
    code, found = run(tmp_path / "ours", "--fault", "power-subsets", scenario="large-call")
    assert code == 0, [(r["case"], r["violations"][:1]) for r in found if r["verdict"] != "pass"]
    agent = "mutant:group-commits-skips-damage"
    caught, results = run(tmp_path / "mutant", "--agent", agent, "--fault", "power-subsets",
                          scenario="large-call")
    assert caught == 1
    failed = [r for r in results if r["verdict"] == "fail"]
    # Only variants fail: the loss that keeps nothing (the case without a mask) leaves no record
    # after a lost one.
    assert failed
    assert all("/power-subsets:" in r["case"] for r in failed), [r["case"] for r in failed]
    assert all({v["invariant"] for v in r["violations"]} == {"log-integrity"} for r in failed), failed
    at = failed[0]["case"]
    replay = crashmatrix("repro", at, "--agent", agent)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "unsynced block(s), those marked 1 in" in replay.stdout
    assert "line 2: not a commit line" in replay.stdout
    # The losses that leave part of the group: a torn last write, the first write kept, only the
    # last block kept (which holds no intent's head: the intent is longer than a block). The group
    # commit holds under each (and under kill, second, power and power-names: the issue note).
    assert run(tmp_path / "others", "--agent", agent, "--fault", "torn", "--fault", "power-keep1",
               "--fault", "power-blocks", scenario="large-call")[0] == 0
