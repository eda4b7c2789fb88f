"""A real Pydantic AI + DBOS app, hosted unmodified: the changelog-fast matrix's verdicts on named
cases, its determinism, the doubled append in `repro`, and no socket but 127.0.0.1.

Pydantic AI (2.68, `DBOSAgent`) on DBOS (3.4, SQLite system database) records each model request
as a step, but runs plain function tools inline in the workflow: recovery re-executes the
workflow from its start, replays the recorded model responses and runs every tool again. So a
crash once `append_note` has appended, up to the workflow's final commit, appends the line a
second time (`at-most-once`), and once `bash` has run, runs the tests again. A crash before the
first tool's effect, or once the outcome is saved, holds. `intent-before-effect` is declared not
applicable by the adapter (a tool is no step: nothing is recorded before it runs).
"""

from __future__ import annotations

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
LINE = "修复登录超时"
SCENARIO = "changelog-fast"
# Registered as `pydantic-ai-dbos` (pyproject.toml's entry points); until the installed metadata
# has the entry, the adapter is named as MODULE:ATTR, which the CLI accepts as well.
AGENT = "pydantic-ai-dbos"  # registered in pyproject.toml, as a user's plugin registers its adapter
STEP = "step.changelog__model.request"  # DBOS's model-request step of the agent named `changelog`

# Skipped where the extra is not installed (the reason says so in pytest's summary); never in CI
# (`CI` set, as .ci/run sets it): there a missing framework fails the tests, so a green run
# cannot have proved less than it says.
needs_pydantic_ai_dbos = pytest.mark.skipif(
    (importlib.util.find_spec("pydantic_ai") is None or importlib.util.find_spec("dbos") is None)
    and not os.environ.get("CI"),
    reason="Pydantic AI or DBOS is not installed (pip install -e '.[pydantic-ai-dbos]')")

# Killed once append_note had appended and before the workflow's outcome was saved: recovery runs
# the tool again (and bash too, from case 17 on, once the tests had run).
DOUBLED_APPEND = {
    f"{SCENARIO}/10:effect.after:append_note/kill",
    f"{SCENARIO}/11:provider.before:chat/kill",
    f"{SCENARIO}/12:provider.after:reply/kill",
    f"{SCENARIO}/13:commit.before:{STEP}/kill",
    f"{SCENARIO}/14:commit.written:{STEP}/kill",
    f"{SCENARIO}/15:commit.after:{STEP}/kill",
    f"{SCENARIO}/16:effect.before:bash/kill",
    f"{SCENARIO}/17:effect.after:bash/kill",
    f"{SCENARIO}/18:provider.before:chat/kill",
    f"{SCENARIO}/19:provider.after:reply/kill",
    f"{SCENARIO}/20:commit.before:{STEP}/kill",
    f"{SCENARIO}/21:commit.written:{STEP}/kill",
    f"{SCENARIO}/22:commit.after:{STEP}/kill",
    f"{SCENARIO}/23:commit.before:workflow.success/kill",
}
# Before the first tool's effect (the model's reply is replayed, or asked again), or once the
# workflow's outcome is saved (DBOS finds nothing pending): each effect happens once.
HELD = {
    f"{SCENARIO}/none",
    f"{SCENARIO}/01:commit.before:workflow.start/kill",
    f"{SCENARIO}/02:commit.written:workflow.start/kill",
    f"{SCENARIO}/03:commit.after:workflow.start/kill",
    f"{SCENARIO}/04:provider.before:chat/kill",
    f"{SCENARIO}/05:provider.after:reply/kill",
    f"{SCENARIO}/06:commit.before:{STEP}/kill",
    f"{SCENARIO}/07:commit.written:{STEP}/kill",
    f"{SCENARIO}/08:commit.after:{STEP}/kill",
    f"{SCENARIO}/09:effect.before:append_note/kill",
    f"{SCENARIO}/24:commit.written:workflow.success/kill",
    f"{SCENARIO}/25:commit.after:workflow.success/kill",
}


def _run(out: Path) -> subprocess.CompletedProcess[str]:
    return crashmatrix("run", "--agent", AGENT, "--scenario", SCENARIO, "--spawn", "fork",
                       "--jobs", "2", "--json", "--out", str(out), cwd=ROOT)


def _traces(out: Path) -> dict[str, Any]:
    """case id -> its probe trace, from a run's results.jsonl."""
    lines = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["case"]: r.get("trace") for r in map(json.loads, lines)}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Verdicts, Path]:
    """The whole changelog-fast matrix against the example app, forked from the preloaded zygote."""
    out = tmp_path_factory.mktemp("pydantic-ai-dbos") / "out"
    done = _run(out)
    assert done.returncode == 1, done.stderr[-3000:]  # violations found
    return json.loads(done.stdout), verdicts(out), out


@needs_pydantic_ai_dbos
def test_the_matrix_names_the_doubled_effects(matrix: tuple[dict[str, Any], Verdicts, Path]) -> None:
    summary, cases, _ = matrix
    assert set(cases) == DOUBLED_APPEND | HELD, sorted(set(cases) ^ (DOUBLED_APPEND | HELD))
    assert {v for v, _ in cases.values()} <= {"pass", "fail"}, "no nondeterministic or error case"
    assert {c for c, (_, inv) in cases.items() if "at-most-once" in inv} == DOUBLED_APPEND
    for case in HELD:
        assert cases[case] == ("pass", []), case
    for case in DOUBLED_APPEND:
        assert cases[case][1] == ["at-most-once", "safe-rerun", "scenario-oracle"], case
    # Every failure carries its one-line reproduction, naming the agent.
    repros = {f["case"]: f["repro"] for f in summary["failures"]}
    for case in DOUBLED_APPEND:
        assert repros[case] == f"crashmatrix repro {case} --agent {AGENT}"
    # The store reader lets every invariant be judged but one-writer (no `concurrent`) and the
    # one the adapter declares does not apply, with its reason.
    assert set(summary["not_applicable"]) == {"one-writer", "intent-before-effect"}
    assert "no DBOS step" in summary["not_applicable"]["intent-before-effect"]


@needs_pydantic_ai_dbos
def test_the_crash_free_case_holds(matrix: tuple[dict[str, Any], Verdicts, Path]) -> None:
    _, cases, _ = matrix
    assert cases[f"{SCENARIO}/none"] == ("pass", [])


@needs_pydantic_ai_dbos
def test_two_runs_give_the_same_cases_verdicts_and_events(
        matrix: tuple[dict[str, Any], Verdicts, Path], tmp_path: Path) -> None:
    # DBOS writes its database from several threads; only the workflow's own commits are probed,
    # and those are made one at a time in the workflow's order: the same events every run.
    # Again on a slice (`--case`, the cases either side of each boundary the verdict turns on):
    # the same verdicts and the same events, case by case.
    _, first, first_out = matrix
    out = tmp_path / "again"
    again = sorted(c for c in first if c != f"{SCENARIO}/none")[::3]
    done = crashmatrix("run", "--agent", AGENT, "--scenario", SCENARIO, "--spawn", "fork", "--jobs", "2",
                       "--out", str(out), *[a for c in again for a in ("--case", c)], cwd=ROOT)
    assert done.returncode == 1, done.stderr[-3000:]
    assert verdicts(out) == {c: first[c] for c in [*again, f"{SCENARIO}/none"]}
    traces = _traces(first_out)
    assert _traces(out) == {c: traces[c] for c in [*again, f"{SCENARIO}/none"]}


@pytest.fixture(scope="module")
def traced_repro(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[tuple[str, str]]]:
    """`repro` of the first doubled case, the harness and every process it starts under strace
    (the zygote, the forked incarnations, their tools): its output, and every connect() seen.
    Keys in the caller's environment must not make the OpenAI client, DBOS or logfire reach out."""
    strace = shutil.which("strace")
    if strace is None and not os.environ.get("CI"):
        pytest.skip("strace is not installed (apt-get install strace; .ci/run installs it)")
    assert strace is not None, "strace is required in CI"
    where = tmp_path_factory.mktemp("pydantic-ai-dbos-repro")
    log = where / "connect.log"
    env = {**os.environ, "OPENAI_API_KEY": "sk-not-a-real-key",
           "ANTHROPIC_API_KEY": "sk-ant-not-a-real-key", "LOGFIRE_TOKEN": "not-a-real-token"}
    env.pop("OPENAI_BASE_URL", None)
    done = subprocess.run(
        [strace, "-f", "--seccomp-bpf", "-e", "trace=connect", "-o", str(log), *CLI, "repro",
         f"{SCENARIO}/10:effect.after:append_note/kill", "--agent", AGENT, "--spawn", "fork"],
        cwd=where, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    return done.stdout, CONNECT.findall(log.read_text(encoding="utf-8"))


@needs_pydantic_ai_dbos
def test_repro_shows_the_two_appends(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    out, _ = traced_repro
    # The tool ran in the first incarnation and again, unasked, in the recovery, which replayed
    # the recorded model response (no request before the re-run).
    assert re.search(r"10\s+effect\.after:append_note call=call_0\s+XX SIGKILL here", out), out
    recovery = out.split("-- incarnation 2", 1)[1].split("-- incarnation 3", 1)[0]
    assert re.search(r"\b1\s+effect\.before:append_note call=call_0", recovery), out
    assert f"     | {LINE}\n     | {LINE}\n" in out, out  # CHANGELOG.md's two lines
    assert f"gained 2 lines '{LINE}'" in out


@needs_pydantic_ai_dbos
def test_a_hosted_run_connects_only_to_127_0_0_1(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    _, seen = traced_repro
    inet, outside = outside_loopback(seen)
    assert inet, "the fake provider was never reached: the trace saw no connection"
    assert outside == [], outside


@needs_pydantic_ai_dbos
def test_black_box_refuses_the_files_dbos_writes_from_several_threads(tmp_path: Path) -> None:
    """DBOS writes its SQLite database from several threads (strace counts calls per thread): the
    n-th write is another write in another run, so black-box names no crash point there and says
    why, instead of cases whose verdicts depend on thread timing (164 of 260 were
    nondeterministic when every call was counted)."""
    out = tmp_path / "out"
    done = crashmatrix("run", "--agent", AGENT, "--scenario", SCENARIO, "--black-box", "--out", str(out),
                       cwd=ROOT)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-3000:]  # nothing crashed
    assert "black-box made no crash point on" in done.stderr
    assert re.search(r"dbos\.sqlite \(\d+ calls\)", done.stderr), done.stderr[-3000:]
    assert "stored to from several threads" in done.stderr
    cases = verdicts(out)
    assert set(cases) == {f"{SCENARIO}/none"}, "no case was made of a refused call"
    assert cases[f"{SCENARIO}/none"][0] == "pass"
