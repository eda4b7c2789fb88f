"""A real LangGraph.js app, hosted unmodified by a Node host: the changelog-fast matrix's verdicts on
named cases, the doubled append in `repro`, no socket but 127.0.0.1, and an app found in its own folder.

LangGraph.js (1.7.3, `SqliteSaver` 1.0.4, `durability: "sync"`) re-runs a tool killed after its
effect and before `putWrites` saved its result, as the Python LangGraph does: `at-most-once` on
exactly those four cases; every other case holds. Each case starts fresh Node processes, so the
test runs a slice of the matrix (`--case`): the named cases, about 30 s on two jobs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support import node_apps
from tests.support.frameworks import CLI, CONNECT, ROOT, Verdicts, crashmatrix, outside_loopback, verdicts

pytestmark = pytest.mark.crash
EXAMPLE = ROOT / "examples" / "langgraph_js_app"
AGENT = "langgraph-js"
LINE = "修复登录超时"

# Killed after the tool's effect and before LangGraph.js saved its result: the tool runs again.
DOUBLED = {
    "changelog-fast/19:effect.after:append_note/kill",
    "changelog-fast/20:commit.before:writes.tools/kill",
    "changelog-fast/35:effect.after:bash/kill",
    "changelog-fast/36:commit.before:writes.tools/kill",
}
# Before the effect, or once its result is saved: the effect happens once.
HELD = {
    "changelog-fast/none",
    "changelog-fast/03:commit.after:checkpoint.input/kill",
    "changelog-fast/18:effect.before:append_note/kill",
    "changelog-fast/21:commit.written:writes.tools/kill",
    "changelog-fast/22:commit.after:writes.tools/kill",
    "changelog-fast/34:effect.before:bash/kill",
    "changelog-fast/37:commit.written:writes.tools/kill",
}


@pytest.fixture(scope="session")
def example_installed() -> Path:
    """The example's npm packages (`npm ci` when node_modules is missing, as in a fresh clone)."""
    return node_apps.ready(EXAMPLE)


@pytest.fixture(scope="module")
def matrix(example_installed: Path,
           tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Verdicts]:
    out = tmp_path_factory.mktemp("langgraph-js") / "out"
    # A slice (`--case`): each case starts fresh Node processes, 2.5 s a case; the whole matrix
    # (50 cases, 46 held, these four violated) is the product's run, not CI's.
    slice_ = [a for case in sorted((DOUBLED | HELD) - {"changelog-fast/none"}) for a in ("--case", case)]
    done = crashmatrix("run", "--agent", AGENT, "--scenario", "changelog-fast", "--jobs", "2", *slice_,
                       "--json", "--out", str(out), cwd=ROOT, timeout=900)
    assert done.returncode == 1, done.stderr[-3000:]  # violations found
    return json.loads(done.stdout), verdicts(out)


def test_the_matrix_names_the_doubled_effects(matrix: tuple[dict[str, Any], Verdicts]) -> None:
    summary, cases = matrix
    assert set(cases) == DOUBLED | HELD
    assert {v for v, _ in cases.values()} <= {"pass", "fail"}, "no nondeterministic or error case"
    assert {c for c, (v, _) in cases.items() if v == "fail"} == DOUBLED
    for case in DOUBLED:
        assert "at-most-once" in cases[case][1], case
    # ChatOpenAI JS sends `name` on tool messages, a key the committed history's wire form lacks:
    # continuation compares what the model sees, so no case fails it (no subclass of ours needed).
    assert not [c for c, (_, violated) in cases.items() if "continuation" in violated]
    for case in HELD:
        assert cases[case] == ("pass", []), case
    repros = {f["case"]: f["repro"] for f in summary["failures"]}
    for case in DOUBLED:
        assert repros[case] == f"crashmatrix repro {case} --agent {AGENT}"
    assert set(summary["not_applicable"]) == {"one-writer", "intent-before-effect"}
    assert "records nothing before a tool runs" in summary["not_applicable"]["intent-before-effect"]


@pytest.fixture(scope="module")
def traced_repro(example_installed: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[tuple[str, str]]]:
    """`repro` of the first doubled case, the harness and every Node process it starts under
    strace: its output, and every connect() seen. Keys and tracing switched on in the caller's
    environment must not make LangChain.js or the OpenAI client reach a vendor."""
    strace = shutil.which("strace")
    if strace is None and not os.environ.get("CI"):
        pytest.skip("strace is not installed (apt-get install strace; .ci/run installs it)")
    assert strace is not None, "strace is required in CI"
    where = tmp_path_factory.mktemp("langgraph-js-repro")
    log = where / "connect.log"
    env = {**os.environ, "LANGSMITH_TRACING": "true", "LANGCHAIN_TRACING_V2": "true",
           "LANGSMITH_API_KEY": "lsv2-not-a-real-key", "OPENAI_API_KEY": "sk-not-a-real-key",
           "ANTHROPIC_API_KEY": "sk-ant-not-a-real-key", "LANGCHAIN_CALLBACKS_BACKGROUND": "true"}
    env.pop("OPENAI_BASE_URL", None)
    done = subprocess.run(
        [strace, "-f", "--seccomp-bpf", "-e", "trace=connect", "-o", str(log), *CLI, "repro",
         "changelog-fast/19:effect.after:append_note/kill", "--agent", AGENT],
        cwd=where, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    return done.stdout, CONNECT.findall(log.read_text(encoding="utf-8"))


def test_repro_shows_the_two_appends(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    out, _ = traced_repro
    assert re.search(r"19\s+effect\.after:append_note call=call_0\s+XX SIGKILL here", out), out
    recovery = out.split("-- incarnation 2", 1)[1].split("-- incarnation 3", 1)[0]
    assert re.search(r"\b1\s+effect\.before:append_note call=call_0", recovery), out
    assert f"     | {LINE}\n     | {LINE}\n" in out, out
    assert f"gained 2 lines '{LINE}'" in out


def test_a_hosted_run_connects_only_to_127_0_0_1(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    _, seen = traced_repro
    inet, outside = outside_loopback(seen)
    assert inet, "the fake provider was never reached: the trace saw no connection"
    assert outside == [], outside


def test_a_users_own_graph_is_loaded_from_its_own_folder(example_installed: Path, tmp_path: Path) -> None:
    # The user's project: the example with an append that checks first, in a folder of its own
    # whose node_modules is the example's (linked, to save an install), named relative to where
    # crashmatrix runs. The host finds LangGraph.js from the app file's folder, never from ours.
    project = tmp_path / "myproject"
    (project / "src").mkdir(parents=True)
    (project / "node_modules").symlink_to(EXAMPLE / "node_modules")
    source = (EXAMPLE / "graph.mjs").read_text(encoding="utf-8")
    guarded = source.replace(
        "  appendFileSync(path,",
        '  if (readFileSync(path, "utf8").split("\\n").includes(line))'
        ' return `${path} already holds that line`;\n'
        "  appendFileSync(path,")
    assert guarded != source
    (project / "src" / "graph.mjs").write_text(guarded, encoding="utf-8")
    agent = AGENT
    listed = crashmatrix("list", "--tools", "--agent", agent, cwd=project,
                         env={**os.environ, "CRASHMATRIX_LANGGRAPH_JS_APP": "src/graph.mjs:build"})
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert {"read", "append_note", "bash"} <= set(re.findall(r"\b(read|append_note|bash)\b", listed.stdout))
    done = crashmatrix("repro", "changelog-fast/19:effect.after:append_note/kill", "--agent", agent,
                       cwd=project, env={**os.environ, "CRASHMATRIX_LANGGRAPH_JS_APP": "src/graph.mjs:build"})
    assert "already holds that line" in done.stdout, done.stdout + done.stderr[-3000:]
    violated = done.stdout.split("-- violated", 1)[1]
    assert "at-most-once" in violated  # the tool still ran twice; its second run changed nothing
    assert "scenario-oracle" not in violated
    assert f"     | {LINE}\n     | {LINE}\n" not in done.stdout
