"""L4: a run whose --out fills up stops with exit 3 and a plain message, and what it wrote is read
by `report` and finished by `--resume` once there is room (a real full tmpfs, in a mount namespace)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bash_scenario import bash_then_append

pytestmark = pytest.mark.crash
CLI = f"{sys.executable} -m crashmatrix"
SCRIPT = """
set -u
mount -t tmpfs -o size=48k tmpfs "$MNT"
{cli} run --scenario changelog-fast --jobs 2 --out "$MNT/o" > "$LOG/run.out" 2> "$LOG/run.err"
echo $? > "$LOG/run.rc"
cp "$MNT/o/results.jsonl" "$LOG/stopped.jsonl"
mount -o remount,size=16m "$MNT"
{cli} report "$MNT/o" > "$LOG/report.out" 2> "$LOG/report.err"
echo $? > "$LOG/report.rc"
{cli} run --scenario changelog-fast --jobs 2 --out "$MNT/o" --resume > "$LOG/resume.out" 2> "$LOG/resume.err"
echo $? > "$LOG/resume.rc"
cp "$MNT/o/results.jsonl" "$LOG/results.jsonl"
"""


def _namespaces() -> str | None:
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True, check=False)
    return None if probe.returncode == 0 else f"unshare -rm: {probe.stderr.strip()}"


def test_a_full_out_is_exit_3_and_what_was_written_resumes(tmp_path: Path) -> None:
    why = _namespaces()
    if why is not None:  # the writer's own behaviour is tested in tests/unit/test_results_full_disk.py
        pytest.skip(f"a small filesystem needs a mount namespace: {why}")
    mnt, log = tmp_path / "mnt", tmp_path / "log"
    mnt.mkdir()
    log.mkdir()
    subprocess.run(["unshare", "-rm", "sh", "-c", SCRIPT.format(cli=CLI)], check=True, timeout=900,
                   env={"PATH": "/usr/bin:/bin", "MNT": str(mnt), "LOG": str(log), "HOME": str(tmp_path)})
    err = (log / "run.err").read_text()
    assert (log / "run.rc").read_text().strip() == "3", err[-3000:]
    assert "results.jsonl: No space left on device" in err, err[-3000:]
    assert "Traceback" not in err
    stopped = (log / "stopped.jsonl").read_bytes()
    assert stopped.endswith(b"\n")  # whole lines only
    saved = [json.loads(line) for line in stopped.splitlines()]
    assert saved
    # The file reads: report counts what it holds and says the run is to be continued (not
    # "line 18: not a case result" as a torn line made it say).
    reported = (log / "report.err").read_text()
    assert (log / "report.rc").read_text().strip() == "3", reported[-3000:]
    assert f"INCOMPLETE: {len(saved)} cases have results" in reported, reported[-3000:]
    assert (log / "resume.rc").read_text().strip() == "0", (log / "resume.err").read_text()[-3000:]
    final = [json.loads(line) for line in (log / "results.jsonl").read_text().splitlines()]
    listed = subprocess.run([sys.executable, "-m", "crashmatrix", "list", "--cases", "--scenario",
                             "changelog-fast"], capture_output=True, text=True, check=True).stdout.split()
    assert sorted(r["case"] for r in final) == sorted(listed)
    assert {r["case"] for r in saved} <= {r["case"] for r in final}
    assert all(r["verdict"] == "pass" for r in final)


FILLER = """
set -u
mount -t tmpfs -o size=40m tmpfs "$MNT"
CRASHMATRIX_TMPDIR="$MNT" {cli} run --scenarios "$SCEN" --scenario filler --out "$LOG/o" \\
    > "$LOG/run.out" 2> "$LOG/run.err"
echo $? > "$LOG/run.rc"
"""


def test_a_case_whose_scratch_filesystem_filled_says_so(tmp_path: Path) -> None:
    """W2: cases share one scratch filesystem; an agent that fills it fails its own and others'
    writes, and the record of a case that ran while it was full says so (with its tree's size),
    as does the run."""
    why = _namespaces()
    if why is not None:
        pytest.skip(f"a small filesystem needs a mount namespace: {why}")
    mnt, log, scen = tmp_path / "mnt", tmp_path / "log", tmp_path / "scen"
    for d in (mnt, log, scen):
        d.mkdir()
    (scen / "filler.toml").write_text(bash_then_append(
        "a full disk", "head -c 50000000 /dev/zero > fill.bin; head -c 9000 /dev/zero | tr '\\0' x; echo"))
    subprocess.run(["unshare", "-rm", "sh", "-c", FILLER.format(cli=CLI)], check=True, timeout=600,
                   env={"PATH": "/usr/bin:/bin", "MNT": str(mnt), "LOG": str(log), "SCEN": str(scen),
                        "HOME": str(tmp_path)})
    err = (log / "run.err").read_text()
    assert (log / "run.rc").read_text().strip() == "1", err[-3000:]
    records = [json.loads(line) for line in (log / "o" / "results.jsonl").read_text().splitlines()]
    failed = [r for r in records if r["verdict"] != "pass"]
    assert failed
    for r in failed:
        assert r["note"].startswith("the scratch filesystem ($SCRATCH) had only "), r["note"]
        assert "this case's tree held" in r["note"]
    assert "the scratch filesystem ($SCRATCH) had only" in (log / "o" / "summary.md").read_text()
    assert "ran low on space during 1 case(s); the largest case tree measured then was filler/none's" in err
