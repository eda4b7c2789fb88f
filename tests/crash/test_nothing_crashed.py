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
