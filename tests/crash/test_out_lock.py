"""Two commands writing one --out: the second is refused before it touches anything (issue 33, L3)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.cli.out_lock import LOCK_FILE

pytestmark = pytest.mark.crash


def crashmatrix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crashmatrix", *args], capture_output=True, text=True,
                          timeout=600, check=False, stdin=subprocess.DEVNULL)


def files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != LOCK_FILE}


def test_a_second_writer_is_refused_and_the_first_ones_files_stay(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = crashmatrix("run", "--scenario", "finished", "--fault", "kill", "--out", str(out))
    assert first.returncode == 0, first.stderr[-2000:]
    before = files(out)
    # A run still writing there: this process holds the lock, as that run would.
    fd = os.open(out / LOCK_FILE, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        for args in (("run", "--scenario", "finished", "--out", str(out)),
                     ("run", "--scenario", "finished", "--out", str(out), "--resume")):
            second = crashmatrix(*args)
            assert second.returncode == 2, second.stderr[-2000:]
            assert "another crashmatrix command is writing there" in second.stderr
        assert files(out) == before
    finally:
        os.close(fd)
    # Released (its holder ended, as any process's lock does): the next run goes ahead.
    assert crashmatrix("run", "--scenario", "finished", "--fault", "kill", "--out", str(out)).returncode == 0
