"""A real OpenAI Agents SDK app, hosted unmodified: the changelog-fast matrix's verdicts on named
cases, its determinism, the doubled append in `repro`, and no socket but 127.0.0.1.

The Agents SDK (0.24, file-backed `SQLiteSession`, restarted by running the unanswered input again
on the same session) saves a tool's call and its output in one write after the tool ran: killed
after the effect and before that write, the restart runs the tool again (`at-most-once`). The
adapter declares `intent-before-effect` not applicable (the SDK records nothing before a tool
runs); every restart that re-sends the input reports `continuation` (the task is sent twice), as
the SDK does.
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

# Skipped where the extra is not installed (the reason says so in pytest's summary); never in CI
# (`CI` set, as .ci/run sets it): there a missing SDK fails the tests, so a green run cannot have
# proved less than it says.
needs_sdk = pytest.mark.skipif(
    importlib.util.find_spec("agents") is None and not os.environ.get("CI"),
    reason="the OpenAI Agents SDK is not installed (pip install -e '.[openai-agents]')")

# Killed after the tool's effect and before the session saved its call and output: it runs again.
DOUBLED = {
    "changelog-fast/07:effect.after:append_note/kill",
    "changelog-fast/08:commit.before:call.append_note,result.append_note/kill",
    "changelog-fast/14:effect.after:bash/kill",
    "changelog-fast/15:commit.before:call.bash,result.bash/kill",
}
# Held: before the input was saved (the caller runs it again, as new), or once the final answer is
# saved (the restart finds it answered and does nothing).
HELD = {
    "changelog-fast/none",
    "changelog-fast/01:commit.before:message.user/kill",
    "changelog-fast/21:commit.written:message.assistant/kill",
    "changelog-fast/22:commit.after:message.assistant/kill",
}
# Every other restart re-sends the input: the task is in the history twice.
RESENT = ["continuation"]



@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Verdicts]:
    """The whole changelog-fast matrix against the example agent, forked from the preloaded zygote."""
    out = tmp_path_factory.mktemp("openai-agents") / "out"
    done = crashmatrix("run", "--agent", "openai-agents", "--scenario", "changelog-fast",
                       "--spawn", "fork", "--json", "--out", str(out), cwd=ROOT)
    assert done.returncode == 1, done.stderr[-3000:]  # violations found
    return json.loads(done.stdout), verdicts(out)


@needs_sdk
def test_the_matrix_names_the_doubled_effects(matrix: tuple[dict[str, Any], Verdicts]) -> None:
    summary, cases = matrix
    assert {v for v, _ in cases.values()} <= {"pass", "fail"}, "no nondeterministic or error case"
    assert len(cases) == 23
    assert {c for c, (_, inv) in cases.items() if "at-most-once" in inv} == DOUBLED
    for case in DOUBLED:
        assert set(cases[case][1]) >= {"at-most-once", *RESENT}, case
    for case in HELD:
        assert cases[case] == ("pass", []), case
    for case in cases.keys() - DOUBLED - HELD:
        assert cases[case] == ("fail", RESENT), case
    # Every failure carries its one-line reproduction, naming the agent.
    repros = {f["case"]: f["repro"] for f in summary["failures"]}
    for case in DOUBLED:
        assert repros[case] == f"crashmatrix repro {case} --agent openai-agents"
    # The store reader lets every invariant be judged but one-writer (no `concurrent`) and the one
    # the adapter declares does not apply, with its reason.
    assert set(summary["not_applicable"]) == {"one-writer", "intent-before-effect"}


@needs_sdk
def test_a_second_run_gives_the_same_cases_and_verdicts(
        matrix: tuple[dict[str, Any], Verdicts], tmp_path: Path) -> None:
    # A seventh of the matrix again (the shard of both effect.after cases and a held one: a shard
    # is chosen from the case ids' order, so it is the same cases in any run that enumerates the
    # same ones), against the module's whole run: the whole matrix twice would double the time.
    _, first = matrix
    out = tmp_path / "again"
    done = crashmatrix("run", "--agent", "openai-agents", "--scenario", "changelog-fast",
                       "--spawn", "fork", "--shard", "7/7", "--out", str(out), cwd=ROOT)
    assert done.returncode == 1, done.stderr[-3000:]
    second = verdicts(out)
    assert set(second) == {"changelog-fast/07:effect.after:append_note/kill",
                           "changelog-fast/14:effect.after:bash/kill",
                           "changelog-fast/21:commit.written:message.assistant/kill"}
    assert second == {case: first[case] for case in second}


@pytest.fixture(scope="module")
def traced_repro(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[tuple[str, str]]]:
    """`repro` of the doubled append, the harness and every process it starts under strace (the
    zygote, the forked incarnations, their tools): its output, and every connect() seen. Tracing
    switched on and a key in the caller's environment must not make the SDK reach OpenAI."""
    strace = shutil.which("strace")
    if strace is None and not os.environ.get("CI"):
        pytest.skip("strace is not installed (apt-get install strace; .ci/run installs it)")
    assert strace is not None, "strace is required in CI"
    where = tmp_path_factory.mktemp("openai-agents-repro")
    log = where / "connect.log"
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "0", "OPENAI_API_KEY": "sk-not-a-real-key"}
    env.pop("OPENAI_BASE_URL", None)
    done = subprocess.run(
        [strace, "-f", "--seccomp-bpf", "-e", "trace=connect", "-o", str(log), *CLI, "repro",
         "changelog-fast/07:effect.after:append_note/kill", "--agent", "openai-agents", "--spawn", "fork"],
        cwd=where, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    return done.stdout, CONNECT.findall(log.read_text(encoding="utf-8"))


@needs_sdk
def test_repro_shows_the_two_appends(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    out, _ = traced_repro
    # The tool ran in the first incarnation; the restart saved the input again and, asked again
    # by the model, ran it again.
    assert re.search(r"7\s+effect\.after:append_note call=call_0\s+XX SIGKILL here", out), out
    recovery = out.split("-- incarnation 2", 1)[1].split("-- incarnation 3", 1)[0]
    assert re.search(r"\b1\s+commit\.before:message\.user seq=2", recovery), out
    assert re.search(r"\b6\s+effect\.before:append_note call=call_0", recovery), out
    assert f"     | {LINE}\n     | {LINE}\n" in out, out  # CHANGELOG.md's two lines
    assert f"gained 2 lines '{LINE}'" in out
    assert "carries the task 2 times" in out


@needs_sdk
def test_a_hosted_run_connects_only_to_127_0_0_1(traced_repro: tuple[str, list[tuple[str, str]]]) -> None:
    _, seen = traced_repro
    inet, outside = outside_loopback(seen)
    assert inet, "the fake provider was never reached: the trace saw no connection"
    assert outside == [], outside


# The durability table's scenario: the doubled append, the re-sent task, and a case that holds.
FAST = {
    "changelog-fast/07:effect.after:append_note/kill": ["at-most-once", "continuation", "scenario-oracle"],
    "changelog-fast/02:commit.written:message.user/kill": ["continuation"],
    "changelog-fast/21:commit.written:message.assistant/kill": [],
}


@needs_sdk
def test_changelog_fast_names_the_doubled_append_and_the_resent_task(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cases = [a for case in FAST for a in ("--case", case)]
    done = crashmatrix("run", "--agent", "openai-agents", "--scenario", "changelog-fast", "--spawn",
                       "fork", "--out", str(out), *cases, cwd=ROOT)
    assert done.returncode == 1, done.stderr[-3000:]
    found = verdicts(out)
    assert found.pop("changelog-fast/none") == ("pass", [])
    assert {c: v for c, (_, v) in found.items()} == FAST
