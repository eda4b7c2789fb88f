"""A real OpenAI Agents SDK (JS) app on its own file-backed session, hosted unmodified by a Node host:
the changelog-fast matrix's verdicts on named cases, and no socket but 127.0.0.1.

The JS SDK (0.20.0) saves a run's items, its input included, in one `addItems` at the end of the
run: every kill from the first tool's effect up to that write loses the run, and the restart
(which re-sends the input, as a service's retry would) runs the tools again: `at-most-once` on
those 8 of 14 cases. The crash-free case, kills before the first effect and kills once the write
landed hold.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import node_apps
from tests.support.frameworks import CLI, CONNECT, ROOT, Verdicts, crashmatrix, outside_loopback, verdicts

pytestmark = pytest.mark.crash
EXAMPLE = ROOT / "examples" / "openai_agents_js_app"
# The module:attr form works whether or not the `openai-agents-js` entry point is registered.
AGENT = "openai-agents-js"
WRITE = "message.user,call.append_note,result.append_note,call.bash,result.bash,message.assistant"
DOUBLED = {
    "changelog-fast/04:effect.after:append_note/kill",
    "changelog-fast/05:provider.before:chat/kill",
    "changelog-fast/06:provider.after:reply/kill",
    "changelog-fast/07:effect.before:bash/kill",
    "changelog-fast/08:effect.after:bash/kill",
    "changelog-fast/09:provider.before:chat/kill",
    "changelog-fast/10:provider.after:reply/kill",
    f"changelog-fast/11:commit.before:{WRITE}/kill",
}
HELD = {
    "changelog-fast/none",
    "changelog-fast/01:provider.before:chat/kill",
    "changelog-fast/03:effect.before:append_note/kill",
    f"changelog-fast/12:commit.written:{WRITE}/kill",
    f"changelog-fast/13:commit.after:{WRITE}/kill",
}


@pytest.fixture(scope="session")
def example_installed() -> Path:
    """The example's npm packages (`npm ci` when node_modules is missing, as in a fresh clone)."""
    return node_apps.ready(EXAMPLE)


@pytest.fixture(scope="module")
def matrix(example_installed: Path,
           tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Verdicts]:
    out = tmp_path_factory.mktemp("openai-agents-js") / "out"
    done = crashmatrix("run", "--agent", AGENT, "--scenario", "changelog-fast", "--jobs", "2",
                       "--json", "--out", str(out), cwd=ROOT, timeout=900)
    assert done.returncode == 1, done.stderr[-3000:]
    return json.loads(done.stdout), verdicts(out)


def test_the_matrix_names_the_lost_runs(matrix: tuple[dict[str, Any], Verdicts]) -> None:
    summary, cases = matrix
    assert len(cases) == 14
    assert {c for c, (v, _) in cases.items() if v == "fail"} == DOUBLED
    for case in DOUBLED:
        assert "at-most-once" in cases[case][1], case
    for case in HELD:
        assert cases[case] == ("pass", []), case
    assert set(summary["not_applicable"]) == {"one-writer", "intent-before-effect"}


def test_a_hosted_run_connects_only_to_127_0_0_1(example_installed: Path, tmp_path: Path) -> None:
    strace = shutil.which("strace")
    if strace is None and not os.environ.get("CI"):
        pytest.skip("strace is not installed (apt-get install strace; .ci/run installs it)")
    assert strace is not None, "strace is required in CI"
    log = tmp_path / "connect.log"
    env = {**os.environ, "OPENAI_API_KEY": "sk-not-a-real-key", "ANTHROPIC_API_KEY": "sk-ant-not-a-real-key",
           "OPENAI_AGENTS_DISABLE_TRACING": "0"}
    env.pop("OPENAI_BASE_URL", None)
    done = subprocess.run(
        [strace, "-f", "--seccomp-bpf", "-e", "trace=connect", "-o", str(log), *CLI, "repro",
         "changelog-fast/04:effect.after:append_note/kill", "--agent", AGENT],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert "gained 2 lines" in done.stdout, done.stdout
    inet, outside = outside_loopback(CONNECT.findall(log.read_text(encoding="utf-8")))
    assert inet, "the fake provider was never reached: the trace saw no connection"
    assert outside == [], outside
