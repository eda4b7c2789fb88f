"""`pytest --crashmatrix`: one test per case, case ids as test ids, xdist-safe, failures carry repro."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

TINY = """
description = "one safe read, then an answer"
task = "Read a.txt."

[workspace]
"a.txt" = "alpha\\n"

[tools]
enabled = ["read"]

[[script]]
name = "start"
when = { turns = 0 }
reply.tool_calls = [{ tool = "read", args = { path = "a.txt" } }]

[[script]]
name = "again"
when = { last_turn = { "read:a.txt" = ["unknown", "error"] } }
reply.tool_calls = [{ tool = "read", args = { path = "a.txt" } }]

[[script]]
name = "report"
when = { last_turn = { "read:a.txt" = "ok" } }
reply.final = "a.txt says {last_line.read:a.txt}"

[expect]
outcome = "completed"
final_answer_contains = "EXPECTED"
"""


def _scenario_dir(pytester: pytest.Pytester, expected: str) -> str:
    d = pytester.mkdir("scen")
    (d / "tiny.toml").write_text(TINY.replace("EXPECTED", expected), encoding="utf-8")
    return str(d)


def _args(d: str) -> list[str]:
    return ["--crashmatrix", "--crashmatrix-scenarios", d, "--crashmatrix-scenario", "tiny",
            "-p", "no:cacheprovider"]


def test_inert_without_the_flag(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_one_test_per_case_with_case_ids(pytester: pytest.Pytester) -> None:
    d = _scenario_dir(pytester, "alpha")
    collected = pytester.runpytest_subprocess(*_args(d), "--collect-only", "-q")
    ids = [line for line in collected.outlines if line.startswith("crashmatrix::")]
    assert ids[0] == "crashmatrix::tiny/none"
    assert [i for i in ids if re.fullmatch(r"crashmatrix::tiny/\d\d:effect.after:read/kill", i)]
    assert all(re.fullmatch(r"crashmatrix::tiny/(none|\d\d:[a-z.]+:\S+/(kill|second|torn))", i) for i in ids)
    # Stable ids: each xdist worker collects them anew, and xdist refuses to run when two
    # workers' collections differ.
    run = pytester.runpytest_subprocess(*_args(d), "-n", "2")
    run.assert_outcomes(passed=len(ids))


def test_a_failing_case_reports_invariant_and_repro(pytester: pytest.Pytester) -> None:
    d = _scenario_dir(pytester, "never-said")
    result = pytester.runpytest_subprocess(*_args(d), "-k", "none")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*scenario-oracle*never-said*",
        # Named from the project's root (here the current directory: no repository around it),
        # never by the absolute path of the machine that ran it.
        "*reproduce: crashmatrix repro tiny/none --scenarios scen",
    ])
    assert d not in result.stdout.str()


def test_the_agent_option_names_an_adapter_or_a_mutant(pytester: pytest.Pytester) -> None:
    d = _scenario_dir(pytester, "alpha")
    bad = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-agent", "bogus")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--crashmatrix-agent: unknown agent 'bogus' (known: durable-agent*"])
    assert "INTERNALERROR" not in bad.stdout.str() + bad.stderr.str()
    # `mutant:NAME` is accepted as on the command line, and its cases run (none errors).
    mutant = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-agent", "mutant:messages-only",
                                          "-k", "none or effect")
    outcomes = mutant.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) >= 2
    assert "errors" not in outcomes


def test_a_project_pins_its_agent_in_its_ini_file(pytester: pytest.Pytester) -> None:
    d = _scenario_dir(pytester, "alpha")
    pytester.makeini("[pytest]\ncrashmatrix_agent = bogus-from-ini\n")
    result = pytester.runpytest_subprocess(*_args(d))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown agent 'bogus-from-ini'*"])
    # The command line wins over the ini file.
    again = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-agent", "durable-agent", "-k", "none")
    again.assert_outcomes(passed=1)


def test_the_fault_option_selects_power_cases_which_run_and_hold(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    d = _scenario_dir(pytester, "alpha")
    collected = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-fault", "power",
                                              "--collect-only", "-q")
    ids = [line for line in collected.stdout.lines if "::" in line]
    assert ids, collected.stdout.str()
    assert all(i.endswith("/power") or i.endswith("tiny/none") for i in ids)
    assert any("commit.after" in i for i in ids)
    run = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-fault", "power", "-k", "commit.after")
    assert run.ret == pytest.ExitCode.OK, run.stdout.str()
    # The toy agent declares only `kill`: its store is not known to be files a power loss acts on.
    toy = Path(__file__).resolve().parents[2] / "examples" / "toy_agent"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(toy), os.environ.get("PYTHONPATH")])))
    bad = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-fault", "power",
                                        "--crashmatrix-agent", "toyagent.adapter:AGENT")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--fault power: needs file-store*"])


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_the_syscalls_option_collects_each_store_call_and_the_settle_s_and_judges_them(
        pytester: pytest.Pytester) -> None:
    d = _scenario_dir(pytester, "alpha")
    collected = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-syscalls", "--collect-only", "-q")
    ids = [line for line in collected.outlines if line.startswith("crashmatrix::")]
    assert any(re.fullmatch(r"crashmatrix::tiny/s\d+:rename:config.tmp/kill", i) for i in ids), ids
    settle = [i for i in ids if i.startswith("crashmatrix::tiny/f")]
    assert settle, ids
    # The mutant that tidies a finished log in place fails exactly where the settle dies between
    # the log's truncate and its rewrite (that ours holds there: tests/crash/test_syscalls.py).
    tidies = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-syscalls", "-k", "tiny/f", "-rA",
                                           "--crashmatrix-agent", "mutant:tidies-finished-log")
    outcomes = _outcomes(tidies)
    failed = [i for i, o in outcomes.items() if o == "FAILED"]
    assert failed == ["tiny/f01:write:session.jsonl/kill"], outcomes
    # Its settle makes three calls more (the log's truncating open, rewrite and sync), each an item.
    assert len(outcomes) == len(settle) + 3
    torn = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-syscalls", "--crashmatrix-fault", "torn")
    assert torn.ret == pytest.ExitCode.USAGE_ERROR
    torn.stderr.fnmatch_lines(["*--crashmatrix-syscalls: none of the selected faults can act at a system*"])


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_the_subsets_of_a_power_loss_run_inside_its_item_and_a_failing_one_is_named(
        pytester: pytest.Pytester) -> None:
    point = ["--crashmatrix", "--crashmatrix-scenario", "large-call", "-p", "no:cacheprovider",
             "-k", "commit.written and tool_started", "--crashmatrix-fault", "power-subsets", "-rA"]
    ours = pytester.runpytest_subprocess(*point)
    assert ours.ret == pytest.ExitCode.OK, ours.stdout.str()
    assert list(_outcomes(ours).values()) == ["PASSED"]
    # The cases count as collected, so -k's arithmetic comes out (once "collected 0 items / 10
    # deselected / -10 selected": they are made after pytest's own collection).
    ours.stdout.fnmatch_lines(["collected * items / * deselected / 1 selected"])
    # The group commit fails in the item of its point, which names each subset that caught it.
    mutant = pytester.runpytest_subprocess(*point, "--crashmatrix-agent", "mutant:group-commits-skips-damage")
    assert list(_outcomes(mutant).values()) == ["FAILED"], mutant.stdout.str()
    mutant.stdout.fnmatch_lines(["*and the * case(s) run within it, the other states of its crash points*",
                                 "large-call/*:commit.written:tool_started.write/power-subsets:*: fail",
                                 "*log-integrity*"])


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    """Each case's test id -> PASSED or FAILED, from `-rA`'s short summary."""
    got = {}
    for line in result.outlines:
        m = re.match(r"(PASSED|FAILED) crashmatrix::(\S+)", line)
        if m:
            got[m.group(2)] = m.group(1)
    return got


def test_crash_states_give_every_case_the_outcome_a_real_kill_gives(pytester: pytest.Pytester) -> None:
    # A built-in scenario with kills, torn writes and second processes: shared recoveries and a
    # second-process host run inside whichever test needs them first, one test at a time. A
    # mutant that only second processes kill: most of its cases pass, and the failing ones are
    # those a host serves (that --states gives our agent's cases their verdicts is
    # tests/crash/test_states.py's, through the command).
    args = ["--crashmatrix", "--crashmatrix-scenario", "changelog-fast", "--crashmatrix-agent",
            "mutant:recover-no-lock", "-p", "no:cacheprovider", "-rA"]
    real = _outcomes(pytester.runpytest_subprocess(*args, "-n", "2"))
    # In one process (no xdist), which prints how many crash points mapped to how many states.
    run = pytester.runpytest_subprocess(*args, "--crashmatrix-states")
    shared = _outcomes(run)
    counts = re.search(r"--crashmatrix-states: changelog-fast (\d+) crash points -> (\d+) states",
                       run.stdout.str())
    assert counts, run.stdout.str()
    assert 0 < int(counts[2]) < int(counts[1]), "cases started from shared states"
    assert len(real) > 50
    assert shared == real
    failed = {c for c, o in real.items() if o == "FAILED"}
    assert failed, "the mutant is killed"
    assert all(c.endswith("/second") for c in failed)
    assert len(failed) < len(real) / 2


def test_crash_states_are_refused_for_an_agent_that_does_not_declare_its_state_in_the_tree(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    d = _scenario_dir(pytester, "alpha")
    toy = Path(__file__).resolve().parents[2] / "examples" / "toy_agent"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(toy), os.environ.get("PYTHONPATH")])))
    bad = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-states",
                                        "--crashmatrix-agent", "toyagent.adapter:AGENT")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--crashmatrix-states: agent*does not declare 'state-in-tree'*"])


def test_a_baseline_makes_known_failures_xfail_and_one_holding_now_fail(pytester: pytest.Pytester) -> None:
    """Issue 34, item 2: the suite is green with its known failures listed (from the ini file, as
    a project pins it), red on one not listed, and red (XPASS, strict) on a listed case that holds."""
    d = _scenario_dir(pytester, "never-said")
    pytester.makefile(".json", known=json.dumps({"format": 1, "cases": {"tiny/none": ["scenario-oracle"]}}))
    pytester.makeini("[pytest]\ncrashmatrix_baseline = known.json\n")
    known = pytester.runpytest_subprocess(*_args(d), "-k", "none", "-rx")
    known.assert_outcomes(xfailed=1)
    known.stdout.fnmatch_lines(["*known failure (baseline): scenario-oracle*"])
    pytester.makefile(".json", other=json.dumps({"format": 1, "cases": {}}))
    new = pytester.runpytest_subprocess(*_args(d), "-k", "none", "--crashmatrix-baseline", "other.json")
    new.assert_outcomes(failed=1)
    # The same case holds with an expectation the agent meets.
    (Path(d) / "tiny.toml").write_text(TINY.replace("EXPECTED", "alpha"), encoding="utf-8")
    fixed = pytester.runpytest_subprocess(*_args(d), "-k", "none")
    fixed.assert_outcomes(failed=1)
    fixed.stdout.fnmatch_lines(["*tiny/none: XPASS(strict): listed as a known failure*remove it*"])
    bad = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-baseline", "nope.json")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--crashmatrix-baseline: nope.json: no such baseline file*"])


def test_a_users_test_runs_a_matrix_and_asserts_on_its_results(pytester: pytest.Pytester) -> None:
    """Issue 34, item 1: the `crashmatrix_run` fixture, its defaults from the ini file."""
    d = _scenario_dir(pytester, "alpha")
    pytester.makeini(f"[pytest]\ncrashmatrix_scenarios = {d}\ncrashmatrix_scenario = tiny\n")
    pytester.makepyfile(test_mine='''
import pytest
from crashmatrix.harness.api import MatrixError

def test_the_whole_matrix_holds(crashmatrix_run):
    results = crashmatrix_run()
    assert results and all(r.ok for r in results), [r.case for r in results if not r.ok]
    assert {r.scenario for r in results} == {"tiny"}

def test_one_case(crashmatrix_run):
    everything = [r.case for r in crashmatrix_run()]
    one = next(c for c in everything if c != "tiny/none")
    assert [r.case for r in crashmatrix_run(cases=[one])] == sorted([one, "tiny/none"])

def test_a_bad_argument_names_what_is_wrong(crashmatrix_run):
    with pytest.raises(MatrixError, match="unknown agent 'bogus'"):
        crashmatrix_run(agent="bogus")
    with pytest.raises(MatrixError, match="is not in the matrix"):
        crashmatrix_run(cases=["tiny/99:nothing:here/kill"])
''')
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_mine.py")
    result.assert_outcomes(passed=3)


def test_depth_runs_the_cases_that_crash_each_recovery_inside_its_single_crash_test(
        pytester: pytest.Pytester) -> None:
    """Issue 34, item 1: `crashmatrix_depth` (and --crashmatrix-depth). pytest fixes its items at
    collection, before any recovery has run, so each single-crash test runs its deeper cases
    itself and names every one that did not hold; the baseline applies to each of them."""
    d = _scenario_dir(pytester, "never-said")  # every case fails the expected answer
    one = "tiny/24:commit.after:message.assistant,run_finished.completed/kill"
    collected = pytester.runpytest_subprocess(*_args(d), "--collect-only", "-q")
    assert f"crashmatrix::{one}" in collected.outlines
    pytester.makeini("[pytest]\ncrashmatrix_depth = 2\n")
    deep = pytester.runpytest_subprocess(*_args(d), "-k", "24 and after")
    deep.assert_outcomes(failed=1)
    # The failure's report, without the short summary (which repeats it whole when CI is set).
    text = deep.stdout.str().split("short test summary info")[0]
    deeper = sorted(set(re.findall(rf"^({re.escape(one)}\+\d\d:\S+): fail$", text, re.MULTILINE)))
    assert deeper, "the deeper cases are named, each with its verdict"
    assert (f"{one} and the {len(deeper)} deeper case(s) that crash its recoveries "
            "(--crashmatrix-depth 2):") in text
    assert text.count("reproduce: crashmatrix repro tiny/24:") == len(deeper) + 1
    # Listed in a baseline, the case and its deeper cases are known failures: xfail.
    known = {c: ["scenario-oracle"] for c in [one, *deeper]}
    pytester.makefile(".json", known=json.dumps({"format": 1, "cases": known}))
    listed = pytester.runpytest_subprocess(*_args(d), "-k", "24 and after", "--crashmatrix-baseline",
                                           "known.json")
    listed.assert_outcomes(xfailed=1)
    # One deeper case left out of it fails the test, and only that one is named.
    del known[deeper[0]]
    pytester.makefile(".json", known=json.dumps({"format": 1, "cases": known}))
    missing = pytester.runpytest_subprocess(*_args(d), "-k", "24 and after", "--crashmatrix-baseline",
                                            "known.json")
    missing.assert_outcomes(failed=1)
    report = missing.stdout.str().split("short test summary info")[0]
    assert re.findall(r"^(tiny/\S+): fail$", report, re.MULTILINE) == [deeper[0]]
    # The command line overrides the ini key; a depth that is no number is a usage error.
    shallow = pytester.runpytest_subprocess(*_args(d), "-k", "24 and after", "--crashmatrix-depth", "1")
    assert "deeper case(s)" not in shallow.stdout.str()
    bad = pytester.runpytest_subprocess(*_args(d), "--crashmatrix-depth", "0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--crashmatrix-depth: '0' is not a whole number of crashes, 1 or more*"])


@pytest.mark.parametrize("agent", ["durable-agent", "mutant:cancel-after-first-reply"])
def test_the_arrivals_option_collects_each_variant_and_its_crash_free_case_judges_it(
        pytester: pytest.Pytester, agent: str) -> None:
    base = ["--crashmatrix", "--crashmatrix-scenario", "cancel", "--crashmatrix-agent", agent,
            "-p", "no:cacheprovider"]
    collected = pytester.runpytest_subprocess(*base, "--crashmatrix-arrivals", "--collect-only", "-q")
    ids = [line for line in collected.stdout.lines if "::" in line]
    variants = {i.split("::", 1)[1].split("/")[0] for i in ids} - {"cancel"}
    assert len(variants) > 5, collected.stdout.str()
    assert all(v.startswith("cancel~user-cancel@") for v in variants)
    plain = pytester.runpytest_subprocess(*base, "--collect-only", "-q")
    assert not any("~" in line for line in plain.stdout.lines)
    # The crash-free case of each variant (and of the scenario as written): the mutant fails only
    # where the cancel is already waiting when its run starts.
    run = pytester.runpytest_subprocess(*base, "--crashmatrix-arrivals", "-k", "none", "-rA")
    outcomes = _outcomes(run)
    assert len(outcomes) == len(variants) + 1, run.stdout.str()
    failed = {case for case, outcome in outcomes.items() if outcome == "FAILED"}
    if agent == "durable-agent":
        assert failed == set(), run.stdout.str()
    else:
        assert "cancel~user-cancel@commit.after:run_started.prompt,message.user/none" in failed
        assert "cancel/none" not in failed
