"""`run --arrivals`: each input and cancel delivered at every kind of point; our agent holds there,
and the arrival mutants are killed there and nowhere else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from crashmatrix.scenarios.arrivals import parse

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
INBOX = ("--scenario", "queued-input", "--scenario", "cancel")
ARRIVAL_MUTANTS = (MutantName.INBOX_CLEARS_ALL, MutantName.CANCEL_AFTER_FIRST_REPLY,
                   MutantName.INPUTS_BEFORE_TASK)


def crashmatrix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=900, check=False,
                          stdin=subprocess.DEVNULL)


def test_our_agent_holds_wherever_an_input_or_a_cancel_arrives(tmp_path: Path) -> None:
    # A third of the matrix (CI's slice; `crashmatrix run --arrivals` runs it all, README).
    proc = crashmatrix("run", *INBOX, "--arrivals", "--states", "--fault", "kill", "--fault", "torn",
                       "--shard", "1/3", "--json", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert rows
    assert {r["verdict"] for r in rows} == {"pass"}
    variants = {r["scenario"] for r in rows if parse(r["scenario"])}
    # Both items, at many kinds of point: polls, commits, requests, tools.
    assert {parse(v).item for v in variants if parse(v)} == {"also-add-retry-log", "user-cancel"}  # type: ignore[union-attr]
    kinds = {str(parse(v).at.kind) for v in variants if parse(v)}  # type: ignore[union-attr]
    assert kinds >= {"inbox.poll", "commit.before", "commit.written", "commit.after", "provider.before",
                     "effect.before", "effect.after"}, kinds
    assert json.loads((tmp_path / "run.json").read_text())["arrivals"] is True
    # A variant's crash points come from its item's arrival on (enumeration.after_arrival).
    for r in rows:
        arrival = parse(r["scenario"])
        if arrival is None or r["case"].endswith("/none"):
            continue
        recorded = next(x for x in rows if x["case"] == f"{r['scenario']}/none")["trace"][0]
        delivered = next(n for n, point in enumerate(recorded, 1)
                         if arrival.at.matches(*point.partition(":")[::2]))
        assert int(r["case"].rsplit("/", 2)[1].split(":")[0]) >= delivered, r["case"]


@pytest.mark.parametrize("name", ARRIVAL_MUTANTS, ids=[m.value for m in ARRIVAL_MUTANTS])
def test_each_arrival_mutant_is_killed_by_a_variant_and_holds_on_the_scenarios_as_written(
        name: MutantName, tmp_path: Path) -> None:
    proc = crashmatrix("mutants", "--mutant", name.value, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (hunt,) = json.loads(proc.stdout)
    assert hunt["killed"], hunt
    assert parse(hunt["case"].split("/")[0]) is not None, hunt
    assert hunt["case"].split("/")[0] in CATALOGUE[name].scenarios
    # Its repro line, as printed, fails again with the same invariant.
    line = hunt["repro"].replace("crashmatrix", f"{sys.executable} -m crashmatrix", 1)
    repro = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, timeout=300,
                           check=False, stdin=subprocess.DEVNULL)
    assert repro.returncode == 1, repro.stdout[-2000:] + repro.stderr[-2000:]
    assert f"{hunt['invariant']}:" in repro.stdout
    # The same scenarios without --arrivals: nothing to find (the whole built-in matrix holds
    # too: the note of issue 36 shows that run).
    held = crashmatrix("run", "--agent", f"mutant:{name.value}", *INBOX, "--states", "--out", str(tmp_path))
    assert held.returncode == 0, held.stdout[-3000:]
