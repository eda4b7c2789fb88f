"""The product's main job on the built-ins: every case holds, every declared branch is reached."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.agent.recovery import DECLARED_BRANCHES

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
SCENARIOS = str(Path(__file__).resolve().parents[1] / "support" / "scenarios")
REPORTS = ("summary.md", "junit.xml", "report.html")


def crashmatrix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=1800, check=False)


@pytest.fixture(scope="module")
def builtin_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("builtin")
    # From crash states: every case with the verdict, branches and events a real kill gives it
    # (tests/crash/test_states.py compares the two on a slice of the built-ins, and on all of them
    # with CRASHMATRIX_STATES_EQUIVALENCE=all), in a third of the time; the real kills of the
    # default run are the other tests' subject (test_harness_cli, test_agent_crashes, ...).
    return out, crashmatrix("run", "--states", "--require-coverage", "--json", "--out", str(out))


def test_every_builtin_case_holds_and_every_branch_is_reached(
        builtin_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    out, proc = builtin_run
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["failed"] == 0
    assert len(summary["scenarios"]) >= 13
    reached = set()
    for line in (out / "results.jsonl").read_text().splitlines():
        reached.update(json.loads(line)["branches"])
    assert set(DECLARED_BRANCHES) <= reached


def test_report_regenerates_identical_files(
        builtin_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    out, _ = builtin_run
    before = {name: (out / name).read_bytes() for name in REPORTS}
    proc = crashmatrix("report", str(out), "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert {name: (tmp_path / name).read_bytes() for name in REPORTS} == before


def test_without_one_scenario_require_coverage_names_the_unreached_branch(
        builtin_run: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> None:
    out, _ = builtin_run
    kept = [line for line in (out / "results.jsonl").read_text().splitlines()
            if json.loads(line)["scenario"] != "policy-changed"]
    (tmp_path / "results.jsonl").write_text("\n".join(kept) + "\n")
    proc = crashmatrix("report", str(tmp_path), "--require-coverage")
    assert proc.returncode == 1
    assert "call.unknown_policy_now_never" in proc.stderr


def test_line_coverage_measures_recoveries_only(tmp_path: Path) -> None:
    proc = crashmatrix("run", "--scenarios", SCENARIOS, "--scenario", "tiny", "--line-coverage",
                       "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    measured = json.loads((tmp_path / "run.json").read_text())["line_coverage"]
    assert measured["percent"] > 30
    assert measured["html"] == "coverage/index.html"
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    later_exited = sum(1 for r in rows for code in r["exit_codes"][1:] if code is not None)
    assert 0 < measured["recoveries"] <= later_exited
    html = (tmp_path / "coverage" / "index.html").read_text()
    assert "recovery.py" in html
    # The total is said where a reader looks: the summary, summary.md and report.html, linked.
    total = f"{measured['percent']}%"
    assert re.search(rf"coverage .*lines\+branches of the agent run by recovery {re.escape(total)}",
                     " ".join(proc.stdout.split())), proc.stdout
    assert f"**{total}**" in (tmp_path / "summary.md").read_text()
    assert "](coverage/index.html)" in (tmp_path / "summary.md").read_text()
    report = (tmp_path / "report.html").read_text()
    assert total in report
    assert 'href="coverage/index.html"' in report


def _measured(data_file: Path, root: Path) -> dict[str, tuple[list[int], list[tuple[int, int]]]]:
    import coverage  # noqa: PLC0415 - only here

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    return {str(Path(f).resolve().relative_to(root)):
            (sorted(data.lines(f) or []), sorted(data.arcs(f) or [])) for f in data.measured_files()}


# Cases of `tiny` that between them take recovery's kinds of path (a torn tail repaired, a call
# with no start, a safe re-run, a second process, a finished run): a fresh interpreter under
# coverage costs 0.3-0.5 s of CPU an incarnation, and the whole matrix fresh was 14 s of a CI run.
SPREAD = tuple(a for case in ("tiny/03:commit.written:run_started.prompt,message.user/torn",
                              "tiny/09:commit.written:message.assistant/kill",
                              "tiny/12:commit.written:tool_started.read/kill",
                              "tiny/14:effect.before:read/second",
                              "tiny/23:commit.written:message.assistant,run_finished.completed/kill")
               for a in ("--case", case))


def test_line_coverage_is_the_same_forked_from_the_zygote_as_in_fresh_interpreters(tmp_path: Path) -> None:
    """The zygote preloads the agent and measures its import-time lines once; the children measure
    only what they run. Together that must be exactly what fresh interpreters, which import the
    agent under coverage each time, measure: every line and every branch arc."""
    root = Path(__file__).resolve().parents[2]
    measured = {}
    for spawn in ("fork", "fresh"):
        out = tmp_path / spawn
        proc = crashmatrix("run", "--scenarios", SCENARIOS, "--scenario", "tiny", "--line-coverage",
                           "--spawn", spawn, *SPREAD, "--out", str(out))
        assert proc.returncode == 0, proc.stderr
        measured[spawn] = _measured(out / ".coverage", root)
    assert measured["fork"], "nothing measured"
    assert any(path.endswith("recovery.py") for path in measured["fork"])
    results = (tmp_path / "fresh" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(results) == len(SPREAD) // 2 + 1, "the recording and each case named"
    assert measured["fork"] == measured["fresh"]


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "builtin-verdicts.json"


def test_every_builtin_gives_the_case_ids_and_verdicts_recorded_before_tools_by_name(
        builtin_run: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    # Recorded by the code before scenarios could name any tool (issue 30): the same cases, each
    # with the same verdict, violated and exercised invariants and not-applicable list.
    out, _ = builtin_run
    got = {}
    for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        got[r["case"]] = [r["verdict"], sorted({v["invariant"] for v in r["violations"]}),
                          r["exercised"], r["not_applicable"]]
    want = json.loads(GOLDEN.read_text(encoding="utf-8"))
    # Built-ins added since (the downstream ones) are judged by their own tests.
    recorded = {case.split("/", 1)[0] for case in want}
    got = {case: v for case, v in got.items() if case.split("/", 1)[0] in recorded}
    assert sorted(got) == sorted(want)
    assert {c: v for c, v in got.items() if v != want[c]} == {}
