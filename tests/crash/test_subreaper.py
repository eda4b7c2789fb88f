"""The harness as a child subreaper: what an agent left running ends with the command, as said."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

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


ADOPTED = textwrap.dedent("""
    import os, subprocess, time
    from crashmatrix.harness.execution.orphans import end_orphans
    from crashmatrix.harness.execution.subreaper import become_subreaper
    assert become_subreaper()
    # As an incarnation's tool does: a shell in a session of its own (every incarnation is one)
    # backgrounds a short sleep and exits; the sleep, adopted here, ends: a zombie with no mark.
    subprocess.run(["sh", "-c", "sleep 0.2 & echo $!; exit 0"], check=True, start_new_session=True,
                   stdout=open("orphan.pid", "w"))
    # And two the harness started itself and has not waited for yet: one in a session of its own
    # (as incarnations, the zygote and strace are), one in the harness's (as a store dump is).
    own = subprocess.Popen(["sh", "-c", "exit 3"], start_new_session=True)
    same = subprocess.Popen(["sh", "-c", "exit 4"])
    time.sleep(0.8)
    orphan = int(open("orphan.pid").read())
    zombies = sorted(p for p in (orphan, own.pid, same.pid)
                     if open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] == "Z")
    print(zombies == sorted((orphan, own.pid, same.pid)))
    end_orphans("no case carries this mark")
    print(os.path.exists(f"/proc/{orphan}"))
    print(own.wait(), same.wait())
""")


def test_an_adopted_orphan_that_exited_is_reaped_at_a_cases_end_and_never_a_child_of_ours(
        tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", ADOPTED], capture_output=True, text=True, timeout=60,
                          check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    all_zombies, orphan_left, codes = proc.stdout.splitlines()
    assert all_zombies == "True", "the three had ended, none waited for"
    assert orphan_left == "False", "the adopted zombie was reaped when the case ended"
    assert codes == "3 4", "the harness's own children keep their exit status for their wait"
