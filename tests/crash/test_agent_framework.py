"""A real Microsoft Agent Framework app, hosted unmodified: the changelog-fast matrix's verdicts on
named cases, its determinism, the doubled append in `repro`, and no socket but 127.0.0.1.

Agent Framework (agent-framework-core 1.23, a workflow on `FileCheckpointStorage`) checkpoints
between supersteps, and an agent's whole turn is one superstep: a kill anywhere after the first
tool's effect and before the superstep's checkpoint resumes from the input checkpoint, and the
agent runs the turn again, tools and all (microsoft/agent-framework issue 3938). `at-most-once`
and `scenario-oracle` on exactly those cases; every other case holds.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.frameworks import CLI, CONNECT, ROOT, Verdicts, crashmatrix, outside_loopback, verdicts

pytestmark = pytest.mark.crash
NAME = "microsoft-agent-framework"
EXAMPLE = ROOT / "examples" / "agent_framework_app" / "changelog_maf"
LINE = "修复登录超时"
AGENT = NAME  # registered in pyproject.toml, as a user's plugin registers its adapter

# Skipped where the framework is not installed (the reason says so in pytest's summary); never in
# CI (`CI` set, as .ci/run sets it): there a missing framework fails the tests.
needs_agent_framework = pytest.mark.skipif(
    importlib.util.find_spec("agent_framework") is None and not os.environ.get("CI"),
    reason="Agent Framework is not installed (pip install -e '.[microsoft-agent-framework]')")

# Killed after append_note's effect and before the superstep's checkpoint: the turn runs again
# from the input checkpoint, and the line is appended twice.
DOUBLED_APPEND = {
    "changelog-fast/07:effect.after:append_note/kill",
    "changelog-fast/08:provider.before:chat/kill",
    "changelog-fast/09:provider.after:reply/kill",
    "changelog-fast/10:effect.before:bash/kill",
    "changelog-fast/11:effect.after:bash/kill",
    "changelog-fast/12:provider.before:chat/kill",
    "changelog-fast/13:provider.after:reply/kill",
    "changelog-fast/14:commit.before:checkpoint.superstep1/kill",
}
# Of those, killed after bash's effect too: the tests ran twice as well.
DOUBLED_BASH = {
    "changelog-fast/11:effect.after:bash/kill",
    "changelog-fast/12:provider.before:chat/kill",
    "changelog-fast/13:provider.after:reply/kill",
    "changelog-fast/14:commit.before:checkpoint.superstep1/kill",
}
# Before the first effect (the turn starts again from nothing done), or once the superstep's
# checkpoint is written (the turn is not run again).
HELD = {
    "changelog-fast/none",
    "changelog-fast/01:commit.before:checkpoint.superstep0/kill",
    "changelog-fast/02:commit.written:checkpoint.superstep0/kill",
    "changelog-fast/03:commit.after:checkpoint.superstep0/kill",
    "changelog-fast/04:provider.before:chat/kill",
    "changelog-fast/05:provider.after:reply/kill",
    "changelog-fast/06:effect.before:append_note/kill",
    "changelog-fast/15:commit.written:checkpoint.superstep1/kill",
    "changelog-fast/16:commit.after:checkpoint.superstep1/kill",
    "changelog-fast/17:commit.before:checkpoint.superstep2/kill",
    "changelog-fast/18:commit.written:checkpoint.superstep2/kill",
    "changelog-fast/19:commit.after:checkpoint.superstep2/kill",
}


def _matrix(out: Path) -> tuple[dict[str, Any], Verdicts]:
    done = crashmatrix("run", "--agent", AGENT, "--scenario", "changelog-fast", "--spawn", "fork",
                       "--json", "--out", str(out), cwd=ROOT)
    assert done.returncode == 1, done.stderr[-3000:]  # violations found
    return json.loads(done.stdout), verdicts(out)


@pytest.fixture(scope="module")
def matrix_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agent-framework") / "out"


@pytest.fixture(scope="module")
def matrix(matrix_out: Path) -> tuple[dict[str, Any], Verdicts]:
    """The whole changelog-fast matrix against the example app, forked from the preloaded zygote."""
    return _matrix(matrix_out)


@needs_agent_framework
def test_the_matrix_names_the_replayed_turn(matrix: tuple[dict[str, Any], Verdicts]) -> None:
    summary, cases = matrix
    assert set(cases) == DOUBLED_APPEND | HELD
    for case in DOUBLED_APPEND:
        assert cases[case][0] == "fail", case
        assert {"at-most-once", "scenario-oracle"} == set(cases[case][1]), case
    for case in HELD:
        assert cases[case] == ("pass", []), case
    # Every failure carries its one-line reproduction, naming the agent.
    repros = {f["case"]: f["repro"] for f in summary["failures"]}
    for case in DOUBLED_APPEND:
        assert repros[case] == f"crashmatrix repro {case} --agent {AGENT}"
    # The store reader lets every invariant be judged but one-writer (no `concurrent`) and the
    # ones the adapter declares do not apply, with their reasons.
    assert set(summary["not_applicable"]) == {"one-writer", "intent-before-effect", "resume-budget"}
    assert "records nothing before a tool runs" in summary["not_applicable"]["intent-before-effect"]


@needs_agent_framework
def test_the_bash_rerun_is_named_where_it_happened(matrix: tuple[dict[str, Any], Verdicts],
                                                    matrix_out: Path) -> None:
    bash_twice = set()
    for line in (matrix_out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if any(v["invariant"] == "at-most-once" and "(bash)" in v["message"] for v in r["violations"]):
            bash_twice.add(r["case"])
    assert bash_twice == DOUBLED_BASH


@needs_agent_framework
def test_two_runs_give_the_same_cases_and_verdicts(matrix: tuple[dict[str, Any], Verdicts],
                                                   tmp_path: Path) -> None:
    # The whole matrix again (20 cases, seconds): the same cases, the same verdicts.
    _, first = matrix
    _, second = _matrix(tmp_path / "again")
    assert {v for v, _ in first.values()} <= {"pass", "fail"}, "no nondeterministic or error case"
    assert first == second


@pytest.fixture(scope="module")
def traced_repro(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[tuple[str, str]]]:
    """`repro` of the first doubled case, the harness and every process it starts under strace
    (the zygote, the forked incarnations, their tools): its output, and every connect() seen.
    Keys and telemetry settings in the caller's environment must not make the framework or the
    OpenAI client reach a vendor."""
    strace = shutil.which("strace")
    if strace is None and not os.environ.get("CI"):
        pytest.skip("strace is not installed (apt-get install strace; .ci/run installs it)")
    assert strace is not None, "strace is required in CI"
    where = tmp_path_factory.mktemp("agent-framework-repro")
    log = where / "connect.log"
    env = {**os.environ, "OPENAI_API_KEY": "sk-not-a-real-key", "AZURE_OPENAI_API_KEY": "not-a-real-key",
           "AZURE_OPENAI_ENDPOINT": "https://example.openai.azure.com", "ENABLE_INSTRUMENTATION": "true",
           "ENABLE_CONSOLE_EXPORTERS": "true"}
    env.pop("OPENAI_BASE_URL", None)
    done = subprocess.run(
        [strace, "-f", "--seccomp-bpf", "-e", "trace=connect", "-o", str(log), *CLI, "repro",
         "changelog-fast/07:effect.after:append_note/kill", "--agent", AGENT, "--spawn", "fork"],
        cwd=where, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    return done.stdout, CONNECT.findall(log.read_text(encoding="utf-8"))


@needs_agent_framework
def test_repro_shows_the_replayed_turn(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    out, _ = traced_repro
    # The tool ran in the first incarnation; the recovery resumed from the input checkpoint and
    # asked the model again from the start, which asked for the append again.
    assert re.search(r"7\s+effect\.after:append_note call=call_0\s+XX SIGKILL here", out), out
    recovery = out.split("-- incarnation 2", 1)[1].split("-- incarnation 3", 1)[0]
    assert re.search(r"\b1\s+provider\.before:chat", recovery), out
    assert re.search(r"\b3\s+effect\.before:append_note call=call_0", recovery), out
    assert f"     | {LINE}\n     | {LINE}\n" in out, out  # CHANGELOG.md's two lines
    assert f"gained 2 lines '{LINE}'" in out


@needs_agent_framework
def test_a_hosted_run_connects_only_to_127_0_0_1(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    _, seen = traced_repro
    inet, outside = outside_loopback(seen)
    assert inet, "the fake provider was never reached: the trace saw no connection"
    assert outside == [], outside


@needs_agent_framework
def test_a_users_own_workflow_factory_is_hosted(tmp_path: Path) -> None:
    # The user's app: the example with an append that checks first (an idempotent tool), named
    # on the command line and found from where crashmatrix runs.
    pkg = tmp_path / "mypkg"
    shutil.copytree(EXAMPLE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for path in pkg.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("changelog_maf.", "mypkg."), encoding="utf-8")
    source = (pkg / "workflow.py").read_text(encoding="utf-8")
    guarded = source.replace(
        '    with Path(path).open("a", encoding="utf-8") as f:',
        '    if line in Path(path).read_text(encoding="utf-8").splitlines():\n'
        '        return f"{path} already holds that line"\n'
        '    with Path(path).open("a", encoding="utf-8") as f:')
    assert guarded != source
    (pkg / "workflow.py").write_text(guarded, encoding="utf-8")
    done = crashmatrix("repro", "changelog-fast/07:effect.after:append_note/kill",
                       "--agent", f"{NAME}:mypkg.workflow:build", cwd=tmp_path)
    # The recovery still runs the turn again, append_note included, but the tool saw its line
    # and appended nothing: CHANGELOG.md gained one line, and every judged invariant holds (the
    # at-most-once verdict counts the effect in the file, not the tool's runs).
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "already holds that line" in done.stdout, done.stdout
    assert "-- every judged invariant held" in done.stdout
    assert f"     | {LINE}\n     | {LINE}\n" not in done.stdout
