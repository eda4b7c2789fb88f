"""A matrix that crashed nothing is no pass (issue 33, O1): an agent whose probe never attaches
gets exit 3 and the reason, not "every case held"."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
TOY = Path(__file__).resolve().parents[2] / "examples" / "toy_agent"
ADAPTER = '''
import sys
from toyagent.adapter import ToyAdapter


class Detached(ToyAdapter):
    name = "detached"
    # The toy agent, started with its probe channel unset: it works, and reports nothing.
    program = ("sh", "-c", 'unset CRASHMATRIX_PROBE; exec "$0" -m toyagent.agent "$@"', sys.executable)


AGENT = Detached()
'''


def run(tmp_path: Path, agent: str) -> subprocess.CompletedProcess[str]:
    shutil.copytree(TOY / "toyagent", tmp_path / "toyagent", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "detached.py").write_text(ADAPTER, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "crashmatrix", "run", "--agent", agent, "--scenario",
                           "changelog-fast", "--out", str(tmp_path / f"out-{agent.partition(':')[0]}")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
                          stdin=subprocess.DEVNULL)


def test_an_agent_whose_probe_never_attaches_is_not_a_pass(tmp_path: Path) -> None:
    proc = run(tmp_path, "detached:AGENT")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ("scenario changelog-fast: no case crashed anything: its crash-free run reported no probe "
            "event") in proc.stderr
    # The same agent with its probe attached crashes and holds.
    attached = run(tmp_path, "toyagent.adapter:AGENT")
    assert attached.returncode == 0, attached.stdout[-2000:] + attached.stderr[-2000:]
    assert "no case crashed anything" not in attached.stderr


def _crashmatrix(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crashmatrix", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600, check=False, stdin=subprocess.DEVNULL)


def test_merge_compare_and_the_plugin_do_not_pass_a_matrix_that_crashed_nothing(tmp_path: Path) -> None:
    shutil.copytree(TOY / "toyagent", tmp_path / "toyagent", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "detached.py").write_text(ADAPTER, encoding="utf-8")
    agent = ["--agent", "detached:AGENT", "--scenario", "changelog-fast"]
    # A shard is let through (it may hold only a recording, its crash cases in other shards);
    # the merge of the shards is judged whole. (One shard of one: the matrix has one case.)
    shard = _crashmatrix(tmp_path, "run", *agent, "--shard", "1/1", "--out", "s1")
    assert shard.returncode == 0, shard.stdout[-2000:] + shard.stderr[-2000:]
    merged = _crashmatrix(tmp_path, "merge", "s1", "--out", "merged")
    assert merged.returncode == 3, merged.stdout[-2000:] + merged.stderr[-2000:]
    assert "scenario changelog-fast: no case crashed anything" in merged.stderr

    compared = _crashmatrix(tmp_path, "compare", "--agent", "detached:AGENT", "--scenario", "changelog-fast",
                            "--out", "cmp")
    assert compared.returncode == 0, compared.stdout[-2000:] + compared.stderr[-2000:]
    row = next(line for line in compared.stdout.splitlines() if line.startswith("changelog-fast"))
    assert "inconclusive: crashed nothing" in row
    assert "held" not in row
    assert "changelog-fast x detached:AGENT: no case crashed anything" in compared.stdout
    assert "no case crashed anything" in (tmp_path / "cmp" / "compare.md").read_text(encoding="utf-8")

    plugin = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--crashmatrix", "--crashmatrix-agent",
         "detached:AGENT", "--crashmatrix-scenario", "changelog-fast", "--rootdir", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL)
    assert plugin.returncode == 1, plugin.stdout[-3000:] + plugin.stderr[-3000:]
    assert "1 failed" in plugin.stdout
    assert "no case crashed anything: its crash-free run reported no probe event" in plugin.stdout
