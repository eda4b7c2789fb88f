"""`crashmatrix run` ends by saying what was proved: invariants, coverage, and every file it wrote."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, load
from crashmatrix.harness.verify import CHECKS
from crashmatrix.reports.coverage import branch_coverage

pytestmark = pytest.mark.crash
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = str(ROOT / "tests" / "support" / "scenarios")
CLI = [sys.executable, "-m", "crashmatrix"]
LABEL = re.compile(r"^(checked|faults|coverage|wrote) +(.*)$")
FILES = {"results.jsonl", "run.json", "summary.md", "junit.xml", "report.html"}


def block(stdout: str) -> dict[str, str]:
    """The facts block, each field's wrapped lines joined back into one."""
    fields: dict[str, str] = {}
    label = None
    for line in stdout.splitlines():
        m = LABEL.match(line)
        if m:
            label = m[1]
            fields[label] = m[2]
        elif label and line.startswith(" " * 11):
            fields[label] += " " + line.strip()
        else:
            label = None
    return fields


def injected(results: list[CaseResult]) -> list[str]:
    """The fault kinds the cases' ids schedule (the registry grows; the ids say what ran)."""
    return sorted({s.fault for r in results for s in Case.parse(r.case).schedule})


def printed_paths(wrote: str) -> list[Path]:
    """`DIR/results.jsonl, run.json, ...`: the first by its path, the rest beside it."""
    first, *rest = wrote.split(", ")
    base = Path(first).parent
    return [Path(first), *(base / name for name in rest)]


def test_the_summary_lists_the_invariants_the_coverage_and_the_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([*CLI, "run", "--scenario", "changelog-fast", "--out", str(out)],
                          capture_output=True, text=True, timeout=1200, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    fields = block(proc.stdout)
    assert set(fields) == {"checked", "faults", "coverage", "wrote"}, proc.stdout[-2000:]
    results = load(out)
    # What the records say some case exercised, in the verifier's order; the rest apart.
    arose = {i for r in results for i in (r.exercised or [])}
    exercised = [str(i) for i in CHECKS if str(i) in arose]
    checked, _, vacuous = fields["checked"].partition("; never exercised, so not shown to hold: ")
    listed = checked.split(": ", 1)[1].split(", ")
    assert listed == exercised, "every invariant some case exercised, in the verifier's order"
    assert fields["checked"].startswith(f"{len(exercised)} invariants:")
    never = [str(i) for i in CHECKS if str(i) not in arose]
    assert vacuous.split(" (")[0].split(", ") == never if never else vacuous == ""
    assert "queued-input" in never, "changelog-fast delivers no input: it cannot show queued inputs are safe"

    assert f"· {len(results)} cases ·" in fields["faults"]
    assert "depth 1" in fields["faults"]
    assert fields["faults"].startswith("kill, second, torn ·")
    declared = json.loads((out / "run.json").read_text())["declared_branches"]
    rows = [c for c in branch_coverage(results, declared) if c.declared]
    reached = sum(1 for c in rows if c.cases)
    assert fields["coverage"].startswith(f"recovery branches {reached}/{len(declared)} reached")
    assert len(declared) > 0

    paths = printed_paths(fields["wrote"])
    assert {p.name for p in paths} == FILES
    assert all(p.exists() and p.parent == out for p in paths), paths


def test_the_json_summary_carries_the_same_facts(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run([*CLI, "run", "--scenarios", SCENARIOS, "--scenario", "tiny", "--out", str(out),
                           "--json"], capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert {"cases", "passed", "failed", "scenarios", "failures", "not_applicable", "out"} <= set(data)
    arose = {i for r in load(out) for i in (r.exercised or [])}
    assert data["invariants"] == [str(i) for i in CHECKS if str(i) in arose]
    assert data["never_exercised"] == [str(i) for i in CHECKS if str(i) not in arose]
    assert data["faults"] == ["kill", "second", "torn"]
    assert data["depth"] == 1
    assert data["distinct_failures"] == 0
    assert data["duration_s"] > 0
    declared = json.loads((out / "run.json").read_text())["declared_branches"]
    assert data["coverage"]["declared"] == len(declared)
    assert {Path(p).name for p in data["files"]} == FILES
    assert all(Path(p).exists() for p in data["files"])
