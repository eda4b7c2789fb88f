"""An agent that cannot start says why on its stderr: the last lines reach results.jsonl, summary.md,
report.html and `repro`, with the values of secret-looking variables redacted everywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.execution.output_cap import HEAD_BYTES, TAIL_BYTES

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
SECRET = "sk-test-1234567890"
MARKER = "[redacted $OPENAI_API_KEY]"
MESSAGE = "loudagent: cannot start: no module named 'nosuchmod'"

# The agent's program: prints its configuration (the key with it, as careless start-up code does)
# and why it stops, in colour, then exits 1 before any probe: nothing else shows why it failed.
AGENT = f'''
import os, sys
print("config: model=gpt-test key=" + os.environ["OPENAI_API_KEY"])
sys.stdout.flush()
print("\\x1b[31m{MESSAGE}\\x1b[0m (key " + os.environ["OPENAI_API_KEY"] + ")", file=sys.stderr)
sys.exit(1)
'''
# Its adapter: a command line, no store reader, nothing but kills (as examples/toy_agent's).
ADAPTER = '''
import sys
from pathlib import Path

from crashmatrix.harness.adapters.interface import Capability, LaunchSpec


class LoudAdapter:
    name = "loud"
    program = (sys.executable, "-m", "loudagent.agent")
    python = None
    capabilities = frozenset({Capability.KILL})

    def start_args(self, spec: LaunchSpec, task: str) -> list[str]:
        return ["run", str(spec.session), str(spec.workspace), spec.provider_url]

    def recover_args(self, spec: LaunchSpec) -> list[str]:
        return ["recover", str(spec.session), str(spec.workspace), spec.provider_url]

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}

    def declared_branches(self) -> tuple[str, ...]:
        return ()


AGENT = LoudAdapter()
'''


def crashmatrix(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # Passed on purpose (agents inherit no key unless named): the agent prints it, and every
    # output must show it redacted.
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "CRASHMATRIX_PASS_ENV": "OPENAI_API_KEY"}
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def test_a_failing_agents_last_words_are_shown_redacted_everywhere(tmp_path: Path) -> None:
    pkg = tmp_path / "loudagent"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "agent.py").write_text(AGENT)
    (pkg / "adapter.py").write_text(ADAPTER)
    out = tmp_path / "out"
    agent = ["--agent", "loudagent.adapter:AGENT"]
    proc = crashmatrix("run", *agent, "--scenario", "changelog-fast", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert SECRET not in proc.stdout + proc.stderr

    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert records
    assert all(r["verdict"] != "pass" for r in records)
    for r in records:
        first = r["agent_output"][0]
        assert first["incarnation"] == 1
        # stdout and stderr, colour codes out, the key redacted in both.
        assert first["tail"] == f"config: model=gpt-test key={MARKER}\n{MESSAGE} (key {MARKER})"

    summary = (out / "summary.md").read_text(encoding="utf-8")
    page = (out / "report.html").read_text(encoding="utf-8")
    for text in (summary, page):
        assert MESSAGE.replace("'", "&#x27;") in text or MESSAGE in text
        assert MARKER in text
    assert '<details class="output">' in page
    for name in ("results.jsonl", "summary.md", "report.html", "junit.xml", "run.json"):
        if (out / name).exists():
            assert SECRET not in (out / name).read_text(encoding="utf-8"), name

    case = records[0]["case"]
    shown = crashmatrix("repro", case, *agent, cwd=tmp_path)
    assert shown.returncode == 1, shown.stdout[-2000:] + shown.stderr[-2000:]
    assert "-- agent output (inc1, last lines; stdout and stderr)" in shown.stdout
    assert f"   | {MESSAGE} (key {MARKER})" in shown.stdout
    assert SECRET not in shown.stdout + shown.stderr


# R1: an agent that prints without end (here 12 MiB, far past what is kept) and then says why it
# stops. Its output used to land whole in the case tree on the shared RAM filesystem.
FLOOD = '''
import sys
block = b"x" * 65535 + b"\\n"
for _ in range(192):
    sys.stdout.buffer.write(block)
sys.stdout.flush()
print("floodagent: giving up", file=sys.stderr)
sys.exit(1)
'''


def test_a_flooding_agents_output_is_capped_and_the_cut_is_said(tmp_path: Path) -> None:
    pkg = tmp_path / "loudagent"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "agent.py").write_text(FLOOD)
    (pkg / "adapter.py").write_text(ADAPTER)
    out = tmp_path / "out"
    proc = crashmatrix("run", "--agent", "loudagent.adapter:AGENT", "--scenario", "changelog-fast",
                       "--out", str(out), "--keep", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    record = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    tail = record["agent_output"][0]["tail"]
    assert tail.endswith("floodagent: giving up")
    logs = list((out / "cases").rglob("inc1.log"))
    assert logs, sorted(str(p) for p in out.rglob("*"))[:20]
    for log in logs:
        data = log.read_bytes()
        # The start and the end are kept, and a line says how much of the middle was cut.
        assert len(data) < HEAD_BYTES + TAIL_BYTES + 200
        assert data.startswith(b"x" * 1000)
        assert b"bytes of this output were cut here" in data
        assert data.endswith(b"floodagent: giving up\n")
