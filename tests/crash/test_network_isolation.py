"""Issue 33, S2: an agent reaches nothing but the fakes. The command runs in a network namespace
of its own with only its loopback: the agent sees another namespace than the test's, no
interface but `lo`, and a port the test listens on (on the test's loopback) is not there for it.
No traffic leaves loopback either way. `CRASHMATRIX_NETWORK=host` keeps the machine's network,
and the command says the agent is not isolated."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.netprobe import PORT_ENV, SEEN_ENV

pytestmark = pytest.mark.crash
ROOT = Path(__file__).resolve().parents[2]
CASE = "changelog-fast/01:commit.before:user/kill"


def _run(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    seen = tmp_path / "seen.json"
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "crashmatrix", "run", "--agent", "tests.support.netprobe:ADAPTER",
             "--scenario", "changelog-fast", "--out", str(tmp_path / "out"), "--case", CASE],
            cwd=ROOT, env={**os.environ, SEEN_ENV: str(seen), PORT_ENV: str(port), **env},
            capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return done, json.loads(seen.read_text(encoding="utf-8"))


def test_an_agent_sees_only_its_own_loopback(tmp_path: Path) -> None:
    done, seen = _run(tmp_path)
    assert seen["netns"] != os.readlink("/proc/self/ns/net"), "the agent shares the test's network"
    assert seen["interfaces"] == ["lo"]
    assert seen["test_port"] == "ConnectionRefusedError", "a port outside its namespace was reached"
    assert "not network-isolated" not in done.stderr
    out = tmp_path / "out"
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["network_exposed"] is None
    for name in ("summary.md", "report.html", "junit.xml"):
        text = (out / name).read_text(encoding="utf-8")
        assert "not network-isolated" not in text, name
        # Issue 34: each opens with the agent and what was judged, faults and depth.
        for shown in ("tests.support.netprobe:ADAPTER", "invariants: ", "kill", "changelog-fast"):
            assert shown in text, (name, shown)
        assert "not judged" in text or "not-judged" in text, name


def test_the_machines_network_is_kept_when_asked_and_said(tmp_path: Path) -> None:
    done, seen = _run(tmp_path, CRASHMATRIX_NETWORK="host")
    assert seen["netns"] == os.readlink("/proc/self/ns/net")
    assert seen["test_port"] == "connected"
    assert "agents are not network-isolated: CRASHMATRIX_NETWORK=host" in done.stderr
    # Said in every report too, and again when `report` rewrites them from run.json.
    out = tmp_path / "out"
    exposed = json.loads((out / "run.json").read_text(encoding="utf-8"))["network_exposed"]
    assert "CRASHMATRIX_NETWORK=host keeps the machine's network" in exposed
    reports = ("summary.md", "report.html", "junit.xml")
    for name in reports:
        assert "Agents were not network-isolated: agents shared" in (out / name).read_text(encoding="utf-8")
        (out / name).unlink()
    again = subprocess.run([sys.executable, "-m", "crashmatrix", "report", str(out)], check=False,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode in (0, 1), again.stderr[-3000:]
    for name in reports:
        assert "Agents were not network-isolated: agents shared" in (out / name).read_text(encoding="utf-8")
