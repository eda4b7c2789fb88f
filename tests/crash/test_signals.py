"""SIGTERM, SIGKILL and an inherited ignored SIGINT: the harness stops cleanly, leaves nothing running."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.crash
SUPPORT = str(Path(__file__).resolve().parents[1] / "support" / "scenarios")

# An agent hung in a tool. Its own sleep (not test_harness_cli's `sleep 300`, which a test there
# looks for machine-wide) lasts long enough to outlive every wait here, and no longer.
HUNG_TOOL = ["sleep", "97"]
STUCK = """\
description = "a bash call that outlives every wait of these tests"
task = "Wait."

[tools]
enabled = ["bash"]

[[script]]
name = "start"
when = { turns = 0 }
reply.tool_calls = [{ tool = "bash", args = { command = "sleep 97" } }]

[[script]]
name = "report"
when = { min_turns = 1 }
reply.final = "done"

[expect]
outcome = "completed"
"""

# The interpreter with SIGINT ignored, as `cmd &` in a script leaves it, then exec'd into the
# command: an ignore survives exec (a preexec_fn would do the same, but is not safe in this
# test process, which may have threads).
IGNORING_SIGINT = [sys.executable, "-c",
                   "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                   "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]


@dataclass
class Harness:
    proc: subprocess.Popen[bytes]
    out: Path
    scratch: Path
    stderr: Path
    seen: list[psutil.Process] = field(default_factory=list)  # its process tree, as last read

    def tree(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.Error):
            self.seen = psutil.Process(self.proc.pid).children(recursive=True)
        return self.seen

    def results(self) -> list[dict[str, object]]:
        path = self.out / "results.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def hung(self) -> bool:
        return any(_cmdline(p) == HUNG_TOOL for p in self.tree())

    def exit_code(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the harness did not exit within {timeout} s of the signal")


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def running(procs: list[psutil.Process]) -> list[str]:
    """Those of `procs` still running (a zombie has ended; only its parent has not reaped it)."""
    out = []
    for p in procs:
        with contextlib.suppress(psutil.Error):
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {' '.join(_cmdline(p))[:100]}")
    return out


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@contextlib.contextmanager
def harness(tmp_path: Path, *scenarios: str, spawn: str = "fork",
            prefix: list[str] | None = None) -> Iterator[Harness]:
    """`crashmatrix run` of `scenarios` (from tests/support and `stuck`), scratch trees under
    tmp_path/scratch; whatever happens, it and every process it was seen to have are killed."""
    (tmp_path / "scenarios").mkdir(exist_ok=True)
    (tmp_path / "scenarios" / "stuck.toml").write_text(STUCK)
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    out = tmp_path / "out"
    args = ["run", "--scenarios", SUPPORT, "--scenarios", str(tmp_path / "scenarios"),
            *(a for s in scenarios for a in ("--scenario", s)), "--timeout", "120", "--jobs", "2",
            "--spawn", spawn, "--out", str(out)]
    command = [*(prefix or [sys.executable]), "-m", "crashmatrix", *args]
    # Files, not pipes: a process that outlived the harness (the defect) must not block a read.
    with (tmp_path / "stdout").open("wb") as stdout, (tmp_path / "stderr").open("wb") as stderr:
        proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                                env={**os.environ, "CRASHMATRIX_TMPDIR": str(scratch)})
    h = Harness(proc, out, scratch, tmp_path / "stderr")
    try:
        yield h
    finally:
        if proc.poll() is None:
            h.tree()
            proc.kill()
        proc.wait(timeout=30)
        for p in h.seen:
            with contextlib.suppress(psutil.Error):
                p.kill()


def started_cases_and_hung(h: Harness, results: int) -> list[psutil.Process]:
    """Wait until `results` cases finished and an agent hangs in its tool; its process tree."""
    wait_until(lambda: len(h.results()) >= results and h.hung(), 120,
               f"{results} results and an agent hung in `{' '.join(HUNG_TOOL)}`")
    tree = h.tree()
    assert [p for p in tree if _cmdline(p) == HUNG_TOOL]
    return tree


def test_sigterm_stops_like_sigint_writes_results_and_leaves_nothing(tmp_path: Path) -> None:
    with harness(tmp_path, "tiny", "stuck") as h:
        tree = started_cases_and_hung(h, 3)
        h.proc.send_signal(signal.SIGTERM)
        code = h.exit_code(60)
        err = h.stderr.read_text()
        assert code == 3, err
        assert "interrupted by SIGTERM" in err
        kept = h.results()
        assert len(kept) >= 3
        assert all(r["verdict"] == "pass" for r in kept)
        summary = (h.out / "summary.md").read_text()
        assert summary.startswith("# crashmatrix")
        assert f"**{len(kept)}** cases" in summary
        assert (h.out / "report.html").exists()
        assert list(h.scratch.iterdir()) == []
        # Everything it started (zygote, agents, the hung tool's shell and sleep) has ended.
        wait_until(lambda: not running(tree), 5, f"its processes to end: {running(tree)}")


@pytest.mark.parametrize("spawn", ["fork", "fresh"])
def test_agents_die_with_a_sigkilled_harness_and_the_next_run_sweeps_its_scratch(
        tmp_path: Path, spawn: str) -> None:
    with harness(tmp_path, "stuck", spawn=spawn) as h:
        tree = started_cases_and_hung(h, 0)
        python = os.path.realpath(sys.executable)
        # The agents (and in fork mode the zygote): every Python process under the harness. The
        # hung tool's shell and sleep are the agent's own children, not the harness's to end.
        agents = [p for p in tree if os.path.realpath(p.exe()) == python]
        assert len(agents) >= (2 if spawn == "fork" else 1), [_cmdline(p) for p in tree]
        assert len(list(h.scratch.iterdir())) == 1
        h.proc.kill()
        assert h.exit_code(10) == -signal.SIGKILL
        wait_until(lambda: not running(agents), 10, f"the agents to die: {running(agents)}")
    # The killed harness's scratch tree is still there; the next run removes it.
    assert len(list(h.scratch.iterdir())) == 1
    after = subprocess.run(
        [sys.executable, "-m", "crashmatrix", "run", "--scenarios", SUPPORT, "--scenario", "tiny",
         "--out", str(tmp_path / "next")],
        env={**os.environ, "CRASHMATRIX_TMPDIR": str(h.scratch)}, capture_output=True, text=True,
        timeout=300, check=False)
    assert after.returncode == 0, after.stderr
    assert list(h.scratch.iterdir()) == []


def test_a_sigint_ignored_by_inheritance_still_stops_the_harness(tmp_path: Path) -> None:
    with harness(tmp_path, "tiny", "stuck", prefix=IGNORING_SIGINT) as h:
        tree = started_cases_and_hung(h, 3)
        h.proc.send_signal(signal.SIGINT)
        code = h.exit_code(60)
        err = h.stderr.read_text()
        assert code == 3, err
        assert "interrupted by SIGINT" in err
        assert len(h.results()) >= 3
        assert list(h.scratch.iterdir()) == []
        wait_until(lambda: not running(tree), 5, f"its processes to end: {running(tree)}")
