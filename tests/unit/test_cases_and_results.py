"""Case ids, enumeration, shards, and the results file: pure pieces of the harness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crashmatrix.harness.adapters.durable import DurableAgentAdapter
from crashmatrix.harness.adapters.interface import Capability
from crashmatrix.harness.enumeration import extensions, in_shard, parse_shard, single_crash_cases
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.registry import check_faults
from crashmatrix.harness.faults.torn import TORN
from crashmatrix.harness.records.case import Case, CaseIdError, CrashStep
from crashmatrix.harness.records.results import (
    CaseResult,
    ResultsError,
    ResultsWriter,
    Verdict,
    load,
    merge,
    summary,
)

FAULTS = (KILL, TORN)
TRACE = ["recovery.branch:nothing.no_open_run", "commit.before:run_started.prompt,message.user",
         "effect.after:append_note"]


def test_case_ids_are_readable_and_round_trip() -> None:
    (first, _, third) = single_crash_cases("changelog", TRACE, FAULTS)
    assert third.case_id == "changelog/03:effect.after:append_note/kill"
    deeper = third.extend(CrashStep(5, "commit.after", "message.tool.append_note"))
    assert deeper.case_id == ("changelog/03:effect.after:append_note/kill"
                              "+05:commit.after:message.tool.append_note/kill")
    for case in (first, third, deeper, Case("changelog")):
        assert Case.parse(case.case_id) == case
    assert Case("changelog").case_id == "changelog/none"


@pytest.mark.parametrize("bad", ["changelog", "changelog/", "changelog/7:effect.after/kill",
                                 "changelog/07:effect.after:x/Zap", "changelog/x7:a:b/kill"])
def test_malformed_case_ids_are_refused(bad: str) -> None:
    with pytest.raises(CaseIdError):
        Case.parse(bad)


def test_an_unregistered_fault_is_refused_by_name() -> None:
    case = Case.parse("changelog/07:effect.after:x/kill+02:commit.written:y/zap")
    durable = DurableAgentAdapter()
    with pytest.raises(CaseIdError, match=r"unknown fault 'zap' \(known: kill, torn\)"):
        check_faults(case, durable, FAULTS)
    torn = Case.parse("changelog/07:commit.written:x/torn")
    check_faults(torn, durable, FAULTS)

    class KillOnly(DurableAgentAdapter):
        name = "kill-only"
        capabilities = frozenset({Capability.KILL})

    with pytest.raises(CaseIdError, match="fault 'torn' needs tear, which agent 'kill-only' does not"):
        check_faults(torn, KillOnly(), FAULTS)


def test_extensions_crash_at_every_event_of_the_finishing_incarnation() -> None:
    case = Case("s", (CrashStep(3, "effect.after", "append_note"),))
    trace = [TRACE, ["recovery.branch:call.unknown_recorded_never", "commit.after:x"], ["settle"]]
    ids = [c.case_id for c in extensions(case, trace, FAULTS)]
    assert ids == ["s/03:effect.after:append_note/kill+01:recovery.branch:call.unknown_recorded_never/kill",
                   "s/03:effect.after:append_note/kill+02:commit.after:x/kill"]


@given(st.integers(1, 7), st.integers(0, 200))
def test_shards_are_disjoint_and_complete(n: int, count: int) -> None:
    owners = [[k for k in range(1, n + 1) if in_shard(i, (k, n))] for i in range(count)]
    assert all(len(o) == 1 for o in owners)


@pytest.mark.parametrize("bad", ["0/3", "4/3", "x", "1/0", "1-3", "/3"])
def test_malformed_shard_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="--shard"):
        parse_shard(bad)


def _result(case: str, verdict: Verdict = Verdict.PASS) -> CaseResult:
    return CaseResult(case=case, scenario=case.split("/", maxsplit=1)[0], depth=1, verdict=verdict,
                      repro=f"crashmatrix repro {case}")


def test_results_round_trip_and_summary(tmp_path: Path) -> None:
    writer = ResultsWriter(tmp_path / "results.jsonl")
    writer.write(_result("a/01:x:y/kill"))
    bad = _result("b/01:x:y/kill", Verdict.FAIL)
    bad.violations = [{"invariant": "pairing", "message": "m", "evidence": {}}]
    writer.write(bad)
    writer.close()
    loaded = load(tmp_path)
    assert [r.case for r in loaded] == ["a/01:x:y/kill", "b/01:x:y/kill"]
    s = summary(loaded, "out")
    assert (s["cases"], s["passed"], s["failed"]) == (2, 1, 1)
    assert s["scenarios"]["b"] == {"cases": 1, "passed": 0, "failed": 1}
    assert s["failures"] == [{"case": "b/01:x:y/kill", "verdict": "fail", "invariants": ["pairing"],
                              "repro": "crashmatrix repro b/01:x:y/kill"}]


def test_damaged_results_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(_result("a/none").to_json()) + "\n{oops\n")
    with pytest.raises(ResultsError, match=r"results.jsonl: line 2"):
        load(path)
    path.write_text("")
    with pytest.raises(ResultsError, match="holds no case results"):
        load(path)
    with pytest.raises(ResultsError, match="no such results file"):
        load(tmp_path / "missing.jsonl")


def test_merge_combines_and_rejects_conflicts() -> None:
    merged = merge([[_result("a/none")], [_result("b/none")], [_result("a/none")]])
    assert [r.case for r in merged] == ["a/none", "b/none"]
    with pytest.raises(ResultsError, match="different verdicts"):
        merge([[_result("a/none")], [_result("a/none", Verdict.FAIL)]])


def test_a_repro_line_names_the_options_that_decided_its_verdict() -> None:
    from crashmatrix.harness.evaluate import repro_command  # noqa: PLC0415 - only here

    case = "s/03:effect.after:append_note/kill"
    assert repro_command(case, []) == f"crashmatrix repro {case}"
    assert repro_command(case, ["checks/s"], "mutant:x", 50, fsync=True, timeout_s=5.0) == (
        f"crashmatrix repro {case} --scenarios checks/s --agent mutant:x --max-events 50 "
        "--fsync on --timeout 5")
    # The defaults are not repeated: a line stays short and survives a change of default.
    plain = repro_command(case, [], max_events=10_000, fsync=False, timeout_s=60.0)
    assert plain == f"crashmatrix repro {case}"
