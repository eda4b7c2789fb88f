"""Secrets and terminals: an agent inherits no key of the harness's, no output holds one, and what
the harness prints never drives the terminal (issue 33, S1 and S5)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
SECRETS = {"OPENAI_API_KEY": "sk-test-openai-LEAKED-0001", "ANTHROPIC_API_KEY": "sk-ant-LEAKED-0002",
           "AWS_SECRET_ACCESS_KEY": "aws-LEAKED-secret-0003"}
# The agent's own view (echo), then what it can dig out of its ancestors' /proc/PID/environ (the
# harness's, which does hold the keys): the first must be empty, the second must be redacted
# wherever the harness writes or prints it.
PROBE = ("echo own=$OPENAI_API_KEY/$ANTHROPIC_API_KEY/$AWS_SECRET_ACCESS_KEY; "
         "python -c \\\"import os\\nfor pid in (os.getppid(), os.getpid()):\\n  p = pid\\n  while p > 1:\\n"
         "    p = int(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1])\\n"
         "    try: print(open(f'/proc/{p}/environ').read().replace(chr(0), ' '))\\n"
         "    except OSError: pass\\\"; printf 'esc:\\\\033]52;c;cHduZWQ=\\\\007\\\\033[2J end\\\\n'")
SCENARIO = f'''description = "the tests print the environment and terminal escapes"
task = "Append the line 'x' to CHANGELOG.md, then run the tests and report the result."

[workspace]
"CHANGELOG.md" = "# Changelog\\n\\n"

[tools]
enabled = ["read", "append_note", "bash"]

[[script]]
name = "start"
when = {{ turns = 0 }}
reply.tool_calls = [{{ tool = "append_note", args = {{ path = "CHANGELOG.md", line = "x" }} }}]

[[script]]
name = "report"
when = {{ last_turn = {{ bash = ["ok", "error", "unknown"] }} }}
reply.final = "done: {{last_line.bash}}"

[[script]]
name = "run-tests"
when = {{ min_turns = 1 }}
reply.tool_calls = [{{ tool = "bash", args = {{ command = "{PROBE}" }} }}]

[expect]
outcome = "completed"
# Never met: every case fails, so every case keeps its evidence (the tool output included).
files = {{ "CHANGELOG.md" = "never" }}
'''


def crashmatrix(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **SECRETS}
    return subprocess.run([sys.executable, "-m", "crashmatrix", *args, "--scenarios", str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=600, check=False, env=env,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def scenarios(tmp_path: Path) -> Path:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "leak.toml").write_text(SCENARIO, encoding="utf-8")
    return tmp_path


def test_no_output_holds_a_secret_and_the_agent_inherits_none(scenarios: Path) -> None:
    out = scenarios / "out"
    proc = crashmatrix(scenarios, "run", "--scenario", "leak", "--fault", "kill", "--out", str(out))
    assert proc.returncode == 1, proc.stderr[-3000:]  # every case fails its files oracle
    written = {p.name: p.read_text(encoding="utf-8", errors="replace") for p in out.iterdir() if p.is_file()}
    assert {"results.jsonl", "summary.md", "junit.xml", "report.html", "run.json"} <= set(written)
    for name, text in {**written, "stdout": proc.stdout, "stderr": proc.stderr}.items():
        for key, value in SECRETS.items():
            assert value not in text, f"{key}'s value in {name}"
    results = written["results.jsonl"]
    assert "own=//" in results  # the agent's own environment held none of them
    assert "[redacted $OPENAI_API_KEY]" in results  # dug out of the harness's, and redacted


def test_repro_redacts_and_shows_terminal_escapes_without_obeying_them(scenarios: Path) -> None:
    proc = crashmatrix(scenarios, "repro", "leak/none")
    assert proc.returncode == 1, proc.stderr[-3000:]
    for value in SECRETS.values():
        assert value not in proc.stdout
    assert "\x1b" not in proc.stdout
    assert "\x07" not in proc.stdout
    assert "\\x1b]52;c;cHduZWQ=\\x07" in proc.stdout
