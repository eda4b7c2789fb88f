"""Issue 33, S3/R3: a daemon an agent leaves behind (double fork, `setsid`: out of its tree and
its group) dies with its case (the next case's agent finds it gone), and none outlives the
command, run as the `crashmatrix` script or as `python -m`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support.daemonizer import AFTER, OVERLAP, PIDS_ENV

pytestmark = pytest.mark.crash
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "crashmatrix"  # the console script pip installed


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("program", [[str(SCRIPT)], [sys.executable, "-m", "crashmatrix"]],
                         ids=["script", "python-m"])
def test_a_daemon_an_agent_left_dies_with_the_command(tmp_path: Path, program: list[str]) -> None:
    pids = tmp_path / "pids.txt"
    done = subprocess.run(
        [*program, "run", "--agent", "tests.support.daemonizer:ADAPTER", "--scenario", "changelog-fast",
         "--out", str(tmp_path / "out"), "--case", "changelog-fast/01:commit.before:user/kill",
         "--jobs", "1"],
        cwd=ROOT, env={**os.environ, PIDS_ENV: str(pids)}, capture_output=True, text=True,
        timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    left = [int(line.split()[0]) for line in pids.read_text(encoding="utf-8").splitlines()]
    assert len(left) >= 2, "the recording and the case each left one (a restart of `run` too)"
    still = [p for p in left if _alive(p)]
    for p in still:  # never leave them to the rest of the suite
        psutil.Process(p).kill()
    assert still == [], "a daemon outlived the command"
    # One case at a time: each later `run` looked for the daemons of the cases before it.
    assert not (tmp_path / OVERLAP).exists(), (tmp_path / OVERLAP).read_text(encoding="ascii")
    assert "process(es) an agent left running" not in done.stderr  # they were gone before the end
    time.sleep(0.2)
    assert not (tmp_path / AFTER).exists()
