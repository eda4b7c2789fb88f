"""A real LangGraph app, hosted unmodified: the changelog matrix's verdicts on named cases, its
determinism, the doubled append in `repro`, a user's own graph factory, and no socket but 127.0.0.1.

LangGraph (1.2, `SqliteSaver`, `durability="sync"`) re-runs a tool killed after its effect and
before `put_writes` saved its result: `at-most-once` on exactly those cases. The other cases hold;
`intent-before-effect` is declared not applicable by the adapter (LangGraph records no intent
before a tool runs) and said so in the summary.
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
EXAMPLE = ROOT / "examples" / "langgraph_app" / "changelog_app"
LINE = "修复登录超时"

# Skipped where the extra is not installed (the reason says so in pytest's summary); never in CI
# (`CI` set, as .ci/run sets it): there a missing framework fails the tests, so a green run
# cannot have proved less than it says.
needs_langgraph = pytest.mark.skipif(
    importlib.util.find_spec("langgraph") is None and not os.environ.get("CI"),
    reason="LangGraph is not installed (pip install -e '.[langgraph]')")

# Killed after the tool's effect and before LangGraph saved its result: the tool runs again.
DOUBLED = {
    "changelog/19:effect.after:append_note/kill",
    "changelog/20:commit.before:writes.tools/kill",
    "changelog/35:effect.after:bash/kill",
    "changelog/36:commit.before:writes.tools/kill",
}
# Before the effect, or once its result is saved: the effect happens once.
HELD = {
    "changelog/none",
    "changelog/03:commit.after:checkpoint.input/kill",
    "changelog/18:effect.before:append_note/kill",
    "changelog/21:commit.written:writes.tools/kill",
    "changelog/22:commit.after:writes.tools/kill",
    "changelog/34:effect.before:bash/kill",
    "changelog/37:commit.written:writes.tools/kill",
}



@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Verdicts]:
    """The whole changelog matrix against the example app, forked from the preloaded zygote, each
    crash point started from its crash state (the adapter declares its state in the tree, and
    tests/crash/test_states.py holds such cases to a real kill's verdict; the shard run below is
    real kills)."""
    out = tmp_path_factory.mktemp("langgraph") / "out"
    done = crashmatrix("run", "--agent", "langgraph", "--scenario", "changelog", "--spawn", "fork",
                       "--states", "--json", "--out", str(out), cwd=ROOT)
    assert done.returncode == 1, done.stderr[-3000:]  # violations found
    return json.loads(done.stdout), verdicts(out)


@needs_langgraph
def test_the_matrix_names_the_doubled_effects(matrix: tuple[dict[str, Any], Verdicts]) -> None:
    summary, cases = matrix
    assert {v for v, _ in cases.values()} <= {"pass", "fail"}, "no nondeterministic or error case"
    assert {c for c, (_, inv) in cases.items() if "at-most-once" in inv} == DOUBLED
    for case in DOUBLED:
        assert "at-most-once" in cases[case][1], case
    for case in HELD:
        assert cases[case] == ("pass", []), case
    # Every failure carries its one-line reproduction, naming the agent.
    repros = {f["case"]: f["repro"] for f in summary["failures"]}
    for case in DOUBLED:
        assert repros[case] == f"crashmatrix repro {case} --agent langgraph"
    # The store reader lets every invariant be judged but one-writer (no `concurrent`) and the
    # one the adapter declares does not apply, with its reason.
    assert set(summary["not_applicable"]) == {"one-writer", "intent-before-effect"}
    assert "records nothing before a tool runs" in summary["not_applicable"]["intent-before-effect"]


@needs_langgraph
def test_two_runs_give_the_same_cases_and_verdicts(tmp_path: Path) -> None:
    # A sixteenth of the matrix, twice: the shard with two doubled cases (a shard is chosen from
    # the case ids, so it is the same cases in any run that enumerates the same ones; the whole
    # matrix twice would double the file's time, and xdist may run this apart from the other).
    runs = []
    for k in (1, 2):
        out = tmp_path / f"run{k}"
        done = crashmatrix("run", "--agent", "langgraph", "--scenario", "changelog", "--spawn", "fork",
                           "--shard", "3/16", "--out", str(out), cwd=ROOT)
        assert done.returncode == 1, done.stderr[-3000:]
        runs.append(verdicts(out))
    first, second = runs
    assert len(first) >= 3
    assert first.keys() & DOUBLED, "the shard must hold a doubled case"
    assert first == second
    for case, (_, invariants) in first.items():
        assert ("at-most-once" in invariants) == (case in DOUBLED), case


@pytest.fixture(scope="module")
def traced_repro(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[tuple[str, str]]]:
    """`repro` of the first doubled case, the harness and every process it starts under strace
    (the zygote, the forked incarnations, their tools): its output, and every connect() seen.
    Tracing and keys in the caller's environment must not make LangChain or the OpenAI client
    reach a vendor."""
    strace = shutil.which("strace")
    if strace is None and not os.environ.get("CI"):
        pytest.skip("strace is not installed (apt-get install strace; .ci/run installs it)")
    assert strace is not None, "strace is required in CI"
    where = tmp_path_factory.mktemp("langgraph-repro")
    log = where / "connect.log"
    env = {**os.environ, "LANGSMITH_TRACING": "true", "LANGCHAIN_TRACING_V2": "true",
           "LANGSMITH_API_KEY": "lsv2-not-a-real-key", "OPENAI_API_KEY": "sk-not-a-real-key"}
    env.pop("OPENAI_BASE_URL", None)
    done = subprocess.run(
        [strace, "-f", "--seccomp-bpf", "-e", "trace=connect", "-o", str(log), *CLI, "repro",
         "changelog/19:effect.after:append_note/kill", "--agent", "langgraph", "--spawn", "fork"],
        cwd=where, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    return done.stdout, CONNECT.findall(log.read_text(encoding="utf-8"))


@needs_langgraph
def test_repro_shows_the_two_appends(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    out, _ = traced_repro
    # The tool ran in the first incarnation and again, unasked, in the recovery.
    assert re.search(r"19\s+effect\.after:append_note call=call_0\s+XX SIGKILL here", out), out
    recovery = out.split("-- incarnation 2", 1)[1].split("-- incarnation 3", 1)[0]
    assert re.search(r"\b1\s+effect\.before:append_note call=call_0", recovery), out
    assert f"     | {LINE}\n     | {LINE}\n" in out, out  # CHANGELOG.md's two lines
    assert f"gained 2 lines '{LINE}'" in out


@needs_langgraph
def test_a_hosted_run_connects_only_to_127_0_0_1(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    _, seen = traced_repro
    inet, outside = outside_loopback(seen)
    assert inet, "the fake provider was never reached: the trace saw no connection"
    assert outside == [], outside


@needs_langgraph
def test_a_users_own_graph_factory_is_hosted(tmp_path: Path) -> None:
    # The user's app: the example with an append that checks first (an idempotent tool), named
    # by the environment and found from where crashmatrix runs.
    pkg = tmp_path / "mypkg"
    shutil.copytree(EXAMPLE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    source = (pkg / "graph.py").read_text(encoding="utf-8")
    guarded = source.replace(
        '    with Path(path).open("a", encoding="utf-8") as f:',
        '    if line in Path(path).read_text(encoding="utf-8").splitlines():\n'
        '        return f"{path} already holds that line"\n'
        '    with Path(path).open("a", encoding="utf-8") as f:')
    assert guarded != source
    (pkg / "graph.py").write_text(guarded, encoding="utf-8")
    done = crashmatrix("repro", "changelog/19:effect.after:append_note/kill",
                       "--agent", "langgraph:mypkg.graph:build", cwd=tmp_path)
    # The recovery still runs the tool again (at-most-once counts runs), but the tool saw its
    # line and appended nothing: the file is right.
    assert "already holds that line" in done.stdout, done.stdout + done.stderr[-3000:]
    violated = done.stdout.split("-- violated", 1)[1]
    assert "at-most-once" in violated
    assert "scenario-oracle" not in violated
    assert f"     | {LINE}\n     | {LINE}\n" not in done.stdout



# The durability table's scenario: the same four windows (the LangGraph.js integration's too).
FAST = {
    "changelog-fast/19:effect.after:append_note/kill": ["at-most-once", "safe-rerun", "scenario-oracle"],
    "changelog-fast/20:commit.before:writes.tools/kill": ["at-most-once", "safe-rerun", "scenario-oracle"],
    "changelog-fast/35:effect.after:bash/kill": ["at-most-once", "safe-rerun"],
    "changelog-fast/36:commit.before:writes.tools/kill": ["at-most-once", "safe-rerun"],
    "changelog-fast/18:effect.before:append_note/kill": [],
    "changelog-fast/21:commit.written:writes.tools/kill": [],
}


@needs_langgraph
def test_changelog_fast_names_the_same_windows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cases = [a for case in FAST for a in ("--case", case)]
    done = crashmatrix("run", "--agent", "langgraph", "--scenario", "changelog-fast", "--spawn", "fork",
                       "--out", str(out), *cases, cwd=ROOT)
    assert done.returncode == 1, done.stderr[-3000:]
    found = verdicts(out)
    assert found.pop("changelog-fast/none") == ("pass", [])
    assert {c: v for c, (_, v) in found.items()} == FAST
