"""A daemonizing agent for issue 33's S3/R3: the messages-only agent, which in its first
incarnation also leaves a daemon behind (a double fork with `setsid`, out of its process tree and
its group, its inherited descriptors closed), writing the daemon's pid to a file outside the
case tree. The daemon sleeps, then
would write `AFTER` beside that file: a harness that lets it live loses control of what it
writes after the run (once, it rewrote results.jsonl).

    crashmatrix run --agent tests.support.daemonizer:ADAPTER
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from crashmatrix.agent import messages_only
from crashmatrix.harness.adapters.baseline import MessagesOnlyAdapter
from crashmatrix.harness.adapters.interface import PythonEntry, python_program
from crashmatrix.harness.execution.orphans import CASE_ENV

PIDS_ENV = "CRASHMATRIX_DAEMON_PIDS"  # a file outside every case tree: "PID CASE-MARK" per line
AFTER = "after"  # the daemon writes this file beside the pids file when it wakes
OVERLAP = "overlap"  # a `run` writes here the daemons of earlier cases it finds still alive
SLEEP_S = 20.0
ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.support.daemonizer"


def leave_daemon(pids: Path) -> None:
    if os.fork() != 0:
        return  # the agent goes on as if nothing happened (the first child is reaped below)
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    # As a daemon does: no inherited descriptor (the probe channel, the output log) kept open.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 4096)
    with pids.open("a", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {os.environ.get(CASE_ENV, '')}\n")
    time.sleep(SLEEP_S)
    (pids.parent / AFTER).write_text("the daemon outlived the run\n", encoding="ascii")
    os._exit(0)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def main(argv: list[str]) -> int:
    if argv and argv[0] == "run":
        pids = Path(os.environ[PIDS_ENV])
        earlier = [line.split(" ", 1) for line in pids.read_text(encoding="utf-8").splitlines()
                   ] if pids.exists() else []
        mine = os.environ.get(CASE_ENV, "")
        # Another case's daemon alive in this one (this case's own earlier `run` may have one).
        alive = [pid for pid, case in earlier if case != mine and _alive(int(pid))]
        if alive:
            with (pids.parent / OVERLAP).open("a", encoding="ascii") as f:
                f.write(" ".join(alive) + "\n")
        leave_daemon(pids)
        os.wait()  # the first child, which exits at once: only the daemon is left
    return messages_only.main(argv)


class DaemonizerAdapter(MessagesOnlyAdapter):
    name = "daemonizer"
    program = python_program(MODULE)
    python: PythonEntry | None = None  # fresh processes: `tests` is not the zygote's to import
    pass_env = (PIDS_ENV,)

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(ROOT)}


ADAPTER = DaemonizerAdapter()

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
