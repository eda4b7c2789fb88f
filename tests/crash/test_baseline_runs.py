"""`run --baseline` and `merge --baseline` (issue 34, item 2): known failures keep a matrix green,
a new failure turns it red naming the case, a listed case that holds again is reported (strict)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
# Two cases of the messages-only baseline agent (its recording fails too: it records no intent).
SLICE = ["--scenario", "changelog-fast", "--case", "changelog-fast/01:commit.before:user/kill",
         "--case", "changelog-fast/03:commit.after:user/kill"]
OURS = ["--scenario", "changelog-fast", "--case",
        "changelog-fast/02:commit.before:run_started.prompt,message.user/kill"]


def cm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


def test_a_baseline_keeps_known_failures_green_and_new_ones_red(tmp_path: Path) -> None:
    first = cm("run", "--agent", "messages-only", *SLICE, "--out", "first", cwd=tmp_path)
    assert first.returncode == 1, first.stderr[-3000:]
    wrote = cm("baseline", "first", "--write", "known.json", cwd=tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    known = json.loads((tmp_path / "known.json").read_text(encoding="utf-8"))
    assert known["agent"] == "messages-only"
    assert known["cases"], "the baseline agent fails some of the slice"

    again = cm("run", "--agent", "messages-only", *SLICE, "--out", "again", "--baseline", "known.json",
               cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{len(known['cases'])} known failure(s) failed again, 0 new, 0 now hold" in again.stderr

    dropped = sorted(known["cases"])[0]
    fewer = {**known, "cases": {c: v for c, v in known["cases"].items() if c != dropped}}
    (tmp_path / "fewer.json").write_text(json.dumps(fewer), encoding="utf-8")
    red = cm("merge", "again", "--out", "merged", "--baseline", "fewer.json", cwd=tmp_path)
    assert red.returncode == 1, red.stderr[-3000:]
    assert f"new failure: {dropped} [" in red.stderr

    # A listed case that holds now (our agent's recording) is reported, and fails the run (strict).
    stale = {"format": 1, "cases": {"changelog-fast/none": ["pairing"]}}
    (tmp_path / "stale.json").write_text(json.dumps(stale), encoding="utf-8")
    fixed = cm("run", "--agent", "durable-agent", *OURS, "--out", "ours", "--baseline", "stale.json",
               cwd=tmp_path)
    assert fixed.returncode == 1, fixed.stderr[-3000:]
    assert "now holds (XPASS, strict): changelog-fast/none: remove it from stale.json" in fixed.stderr

    bad = cm("run", "--agent", "durable-agent", *OURS, "--out", "bad", "--baseline", "nope.json",
             cwd=tmp_path)
    assert bad.returncode == 2
    assert "--baseline: nope.json: no such baseline file" in bad.stderr
    assert not (tmp_path / "bad").exists()  # refused before anything was written
