"""Every kill `crashmatrix mutants` reports comes with a command that, run as printed, fails the same way."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]


def test_each_kill_carries_a_repro_that_fails_the_same_way() -> None:
    names = ["rerun-never", "resend-task"]  # a recovery fault and a loop fault
    proc = subprocess.run([*CLI, "mutants", "--json", *[a for n in names for a in ("--mutant", n)]],
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    hunts = json.loads(proc.stdout)
    assert [h["mutant"] for h in hunts] == names
    for hunt in hunts:
        command = shlex.split(hunt["repro"])
        assert command[:2] == ["crashmatrix", "repro"]
        assert command[2] == hunt["case"]
        again = subprocess.run([*CLI, *command[1:]], capture_output=True, text=True, timeout=300,
                               check=False)
        assert again.returncode == 1, again.stdout + again.stderr  # violated, not PASS
        assert again.stdout.startswith(f"case {hunt['case']}: FAIL"), again.stdout[:200]
        violated = again.stdout.split("-- violated\n", 1)[1]
        assert violated.lstrip().startswith(f"{hunt['invariant']}:")
