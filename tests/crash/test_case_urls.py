"""Issue 33, S4: a case's URL on the fakes carries a secret, so a local process that knows the
port and the case's predictable name (its directory, a hash of the case id) cannot reach it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.forger import STATUS_ENV

pytestmark = pytest.mark.crash
ROOT = Path(__file__).resolve().parents[2]


def test_a_process_that_guesses_a_cases_url_reaches_no_case(tmp_path: Path) -> None:
    status = tmp_path / "status.txt"
    done = subprocess.run(
        [sys.executable, "-m", "crashmatrix", "run", "--agent", "tests.support.forger:ADAPTER",
         "--scenario", "changelog-fast", "--out", str(tmp_path / "out"),
         "--case", "changelog-fast/01:commit.before:user/kill"],
        cwd=ROOT, env={**os.environ, STATUS_ENV: str(status)}, capture_output=True, text=True,
        timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    seen = status.read_text(encoding="ascii").split()
    assert len(seen) >= 2, "the recording and the case each tried"
    assert set(seen) == {"404"}, f"a guessed case URL was answered: {seen}"
