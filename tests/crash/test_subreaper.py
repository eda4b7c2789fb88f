"""The harness as a child subreaper: what an agent left running ends with the command, as said."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.crash

SCRIPT = textwrap.dedent("""
    import subprocess, time
    from crashmatrix.harness.execution.subreaper import become_subreaper, end_leftovers
    import psutil
    assert become_subreaper()
    # Each shell exits at once, leaving its background sleep to be adopted by this process.
    subprocess.run(["sh", "-c", "sleep 0.2 & exit 0"], check=True)
    subprocess.run(["sh", "-c", "sleep 60 & exit 0"], check=True)
    time.sleep(0.8)  # the short sleep has ended: a zombie nobody waited for
    states = sorted(p.status() for p in psutil.Process().children())
    print(states)
    print(end_leftovers())
    print(psutil.Process().children())
""")


def test_a_daemon_is_ended_and_counted_and_an_orphan_that_already_exited_is_reaped_uncounted() -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    states, left, after = proc.stdout.splitlines()
    assert states == "['sleeping', 'zombie']"
    assert left == "1", "only the sleep still running was left running"
    assert after == "[]", "the zombie was reaped with it"
