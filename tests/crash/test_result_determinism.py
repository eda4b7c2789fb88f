"""The same matrix gives the same records whatever `--jobs`: no pid, scratch path or duration in them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
TIMINGS = ("duration_ms", "incarnation_ms")
# A case tree's scratch directory (harness/execution/scratch.py): PREFIX-PID-RANDOM.
SCRATCH = re.compile(r"crashmatrix-(?:[a-z]+-)?[0-9]+-[a-z0-9_]{8}")


def _run(out: Path, jobs: int) -> dict[str, dict[str, Any]]:
    # recover-no-lock fails `second` cases with messages quoting the agent's refusal (a pid) and
    # log-integrity messages naming the session path: the records most likely to differ.
    proc = subprocess.run([*CLI, "run", "--agent", "mutant:recover-no-lock", "--scenario", "changelog-fast",
                           "--jobs", str(jobs), "--out", str(out)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {r["case"]: {k: v for k, v in r.items() if k not in TIMINGS} for r in records}


def test_records_and_reports_are_the_same_at_one_job_and_two(tmp_path: Path) -> None:
    one, two = _run(tmp_path / "one", 1), _run(tmp_path / "two", 2)
    failing = [c for c, r in one.items() if r["verdict"] != "pass"]
    assert failing, "the mutant must be caught for this test to compare failing records"
    assert sorted(one) == sorted(two)
    differ = [c for c in one if one[c] != two[c]]
    assert differ == [], f"{len(differ)} records differ, e.g. {differ[:3]}"
    for name in ("results.jsonl", "summary.md", "junit.xml", "report.html"):
        text = (tmp_path / "one" / name).read_text(encoding="utf-8")
        assert not SCRATCH.search(text), f"{name} names a scratch tree: {SCRATCH.search(text)}"
