"""A downstream service under the crash matrix, with our agent: a keyed re-send is a replay the
service applies once; an unkeyed one is a second operation, flagged from the service's own record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
SCENARIOS = str(Path(__file__).resolve().parents[1] / "support" / "scenarios")
RERUN = "15:effect.after:bash/kill"  # killed after the send, before its result was saved


def crashmatrix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crashmatrix", *args, "--scenarios", SCENARIOS],
                          capture_output=True, text=True, timeout=600, check=False,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("scenario", ["downstream-keyed", "downstream-two-keyed"])
def test_keyed_sends_hold_on_every_case(tmp_path: Path, scenario: str) -> None:
    # Two sends, each re-run after a crash and replayed: the service's record judges the repeats.
    proc = crashmatrix("run", "--scenario", scenario, "--fault", "kill", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_a_keyed_send_rerun_after_a_crash_is_replayed_not_applied_again() -> None:
    repro = crashmatrix("repro", f"downstream-keyed/{RERUN}")
    assert repro.returncode == 0, repro.stdout[-2000:]
    assert "mail POST /messages key=refund-A-1001 -> 201 applied op_1" in repro.stdout
    assert "mail POST /messages key=refund-A-1001 -> 201 replayed op_1" in repro.stdout


def test_an_unkeyed_send_rerun_is_two_operations_flagged_at_most_once(tmp_path: Path) -> None:
    proc = crashmatrix("run", "--scenario", "downstream-unkeyed", "--fault", "kill", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stderr[-2000:]
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    flagged = [r for r in results if any(v["invariant"] == "at-most-once" for v in r["violations"])]
    assert f"downstream-unkeyed/{RERUN}" in {r["case"] for r in flagged}
    for r in flagged:
        sent = r["evidence"]["downstream"]
        applied = [d for d in sent if d["outcome"] == "applied"]
        assert len(applied) == 2, sent
        assert len({d["incarnation"] for d in applied}) == 2  # one before the crash, one after
        (v,) = [v for v in r["violations"] if v["invariant"] == "at-most-once"]
        assert v["evidence"]["judged_from"] == "downstream"


@pytest.mark.parametrize(("scenario", "cause"), [
    ("downstream-unkeyed", "status-before-resend"),  # no key, re-sent without asking first
    ("downstream-freshkey", "downstream-key"),  # a key made anew at each send
])
def test_the_cause_of_a_downstream_double_is_named(tmp_path: Path, scenario: str, cause: str) -> None:
    proc = crashmatrix("run", "--scenario", scenario, "--fault", "kill", "--out", str(tmp_path))
    assert proc.returncode == 1, proc.stderr[-2000:]
    results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    failed = [r for r in results if r["verdict"] != "pass"]
    assert f"{scenario}/{RERUN}" in {r["case"] for r in failed}
    for r in failed:
        assert {v["invariant"] for v in r["violations"]} == {"at-most-once", cause}, r["case"]
        assert r["repro"].startswith(f"crashmatrix repro {scenario}/")
