"""run.json and completeness: the record, its judgement of a result set, how reports show it; merge."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from crashmatrix.harness.records.results import (
    RESULTS_FILE,
    CaseResult,
    ResultsError,
    ResultsWriter,
    load,
    merge,
    write_results,
)
from crashmatrix.harness.records.run_record import (
    Completeness,
    Completion,
    LineCoverageRecord,
    RunEnd,
    RunFileError,
    RunOptions,
    RunRecord,
    Shards,
    judge,
    read_run,
    write_run,
)
from crashmatrix.reports import html, markdown, terminal
from tests.unit.test_reports_data import DECLARED, sample_results

OPTIONS = RunOptions(agent="durable-agent", depth=2, fsync=False, timeout=60.0, spawn="fork",
                     scenarios=("changelog", "tool-stop"), shard=None)


def finished(results: list[CaseResult]) -> RunRecord:
    """What `run` writes when its matrix ran to the end."""
    counts = dict(Counter(r.scenario for r in results))
    return RunRecord(declared_branches=DECLARED, options=OPTIONS, expected=counts, known=len(results),
                     done=len(results), complete=True, ended=RunEnd.FINISHED)


def interrupted(known: int, done: int) -> RunRecord:
    return RunRecord(declared_branches=DECLARED, options=OPTIONS, known=known, done=done, complete=False,
                     ended=RunEnd.INTERRUPTED)


def test_a_finished_run_is_complete_and_says_nothing() -> None:
    results = sample_results()
    c = judge(finished(results), results)
    assert c == Completeness(Completion.COMPLETE, len(results), len(results))
    assert c.line is None


def test_an_interrupted_run_is_incomplete_with_its_floor() -> None:
    results = sample_results()
    c = judge(interrupted(known=734, done=3), results[:3])
    assert c.state is Completion.INCOMPLETE
    assert c.line == "INCOMPLETE: 3 of at least 734 cases have results (the run was interrupted)"
    exact = judge(replace(interrupted(known=734, done=3), expected={"changelog": 734}), results[:3])
    assert exact.line == "INCOMPLETE: 3 of 734 cases have results (the run was interrupted)"
    # Killed before its end was written: nothing counted yet, no floor worth giving.
    started = RunRecord(declared_branches=DECLARED, options=OPTIONS, done=0, complete=False)
    assert judge(started, results[:3]).line == (
        "INCOMPLETE: 3 cases have results, of a number not yet known "
        "(the run recorded no end: it was killed, failed, or is still running)")


def test_lines_lost_from_a_finished_run_make_it_incomplete() -> None:
    results = sample_results()
    changelog = [r for r in results if r.scenario == "changelog"]
    kept = changelog[:-2] + [r for r in results if r.scenario != "changelog"]
    c = judge(finished(results), kept)
    assert c.state is Completion.INCOMPLETE
    total = len(changelog)
    assert c.line == (f"INCOMPLETE: {len(kept)} of {len(results)} cases have results (results.jsonl holds "
                      f"fewer results than run.json expects (changelog: {total - 2} of {total}))")


def test_without_a_count_completeness_is_unknown_and_said_so() -> None:
    results = sample_results()
    assert judge(None, results).line == (f"completeness unknown: {len(results)} cases have results; no "
                                         "run.json beside the results records how many cases were expected")
    old = RunRecord(declared_branches=DECLARED, options=OPTIONS, format=1)
    assert judge(old, results).state is Completion.UNKNOWN
    assert "written by an older crashmatrix" in (judge(old, results).line or "")
    extra = judge(finished(results[:3]), results)
    assert extra.state is Completion.UNKNOWN
    assert "more results than run.json expects" in (extra.line or "")


def test_a_merge_missing_a_shard_names_it() -> None:
    results = sample_results()
    shards = Shards(of=3, present=(1, 3), incomplete=(3,))
    record = RunRecord(declared_branches=DECLARED, options=OPTIONS, known=40, complete=False, shards=shards)
    assert shards.missing == (2,)
    assert judge(record, results[:20]).line == (
        "INCOMPLETE: 20 of at least 40 cases have results (shard 2/3 missing; shard 3/3 incomplete)")
    # A floor no higher than what is there is not shown.
    assert judge(replace(record, known=20), results[:20]).line == (
        "INCOMPLETE: 20 cases have results, of a number not yet known "
        "(shard 2/3 missing; shard 3/3 incomplete)")


def test_run_json_round_trips_and_reads_the_older_format(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    record = replace(finished(sample_results()), shards=Shards(of=2, present=(1, 2)))
    write_run(path, record)
    assert read_run(path) == record
    data = json.loads(path.read_text())
    assert data["complete"] is True
    assert data["expected_total"] == len(sample_results())
    assert data["merged"]["missing"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # no temp file left
    # What earlier versions wrote: options but no counts. Read, with completeness unknown.
    path.write_text(json.dumps({"agent": "durable-agent", "declared_branches": ["a"], "depth": 1,
                                "fsync": False, "spawn": "fork", "scenarios": ["tiny"], "shard": None}))
    old = read_run(path)
    assert old is not None
    assert (old.format, old.complete, old.options.timeout, old.options.depth) == (1, None, None, 1)
    assert old.options.unrecorded() == ["timeout", "max_events"]
    assert read_run(tmp_path / "missing.json") is None


def test_a_syscalls_run_from_before_settle_steps_differs_from_one_now(tmp_path: Path) -> None:
    # A --syscalls run written before settles were traced lists none of their calls: resuming it
    # would add no settle case, so its options differ from those of a --syscalls run now.
    path = tmp_path / "run.json"
    now = replace(OPTIONS, syscalls=True, syscall_settles=True)
    write_run(path, RunRecord(declared_branches=DECLARED, options=now))
    data = json.loads(path.read_text())
    assert data["syscall_settles"] is True
    del data["syscall_settles"]
    path.write_text(json.dumps(data))
    old = read_run(path)
    assert old is not None
    assert old.options.differences(now) == [("syscall_settles", False, True)]


@pytest.mark.parametrize(("data", "message"), [
    ({"declared_branches": [], "depth": "2"}, "depth must be an integer"),
    ({"declared_branches": [], "complete": "yes"}, "complete must be true or false"),
    ({"declared_branches": [], "expected": {"tiny": -1}}, "expected must be an object of case counts"),
    ({"declared_branches": [], "ended": "paused"}, "ended must be one of finished, interrupted"),
    ({"declared_branches": [], "merged": {"of": 3}}, "merged.present must be a list of shard numbers"),
    ({"declared_branches": [], "complete": True}, "complete is true, but expected gives no case counts"),
    ({"declared_branches": "all"}, "declared_branches must be a list of strings"),
    ({"declared_branches": [], "line_coverage": {"percent": "64%", "html": "c/i.html", "recoveries": 3}},
     "line_coverage.percent must be a number"),
    ({"declared_branches": [], "line_coverage": {"percent": 64.7, "recoveries": 3}},
     "line_coverage.html must be a string"),
    ([], "not a run description"),
])
def test_a_damaged_run_json_is_refused_naming_the_file_and_field(
        tmp_path: Path, data: object, message: str) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    with pytest.raises(RunFileError, match=f"^{path}: {message}"):
        read_run(path)


def test_the_line_coverage_total_survives_a_round_trip(tmp_path: Path) -> None:
    measured = LineCoverageRecord(64.7, "coverage/index.html", 90)
    record = RunRecord(declared_branches=("a",), line_coverage=measured)
    write_run(tmp_path / "run.json", record)
    assert read_run(tmp_path / "run.json") == record
    assert "line_coverage" not in RunRecord(declared_branches=()).to_json()  # never measured: absent


def test_options_differences_name_each_recorded_field() -> None:
    other = replace(OPTIONS, depth=1, agent="messages-only", timeout=None)
    assert OPTIONS.differences(other) == [("agent", "durable-agent", "messages-only"), ("depth", 2, 1)]
    assert OPTIONS.differences(replace(OPTIONS, shard="1/3")) == [("shard", None, "1/3")]
    assert OPTIONS.differences(replace(OPTIONS, shard="1/3"), ignore=("shard",)) == []


def test_merge_refuses_two_different_records_of_one_case() -> None:
    results = sample_results()
    first = results[1]
    for change in ({"trace": [["x:y"]]}, {"branches": ["other"]}, {"agent": "messages-only"},
                   {"fsync": True}):
        with pytest.raises(ResultsError, match=rf"^case {first.case} appears twice with different "
                                               rf"{next(iter(change))} \(in a and b\)$"):
            merge([[first], [replace(first, **change)]], names=["a", "b"])  # type: ignore[arg-type]
    # The same record twice, or one whose timings alone differ, is one case.
    again = replace(first, duration_ms=1.0, incarnation_ms=[1.0])
    assert merge([[first], [again]]) == [first]


def test_a_resumed_writer_keeps_every_line(tmp_path: Path) -> None:
    results = sample_results()
    path = tmp_path / RESULTS_FILE
    writer = ResultsWriter(path)
    writer.write(results[0])
    writer.close()
    path.write_text(path.read_text().rstrip("\n"))  # a last line without its newline
    writer = ResultsWriter(path, append=True)
    writer.write(results[1])
    writer.close()
    assert load(path) == results[:2]
    write_results(path, results)
    assert load(path) == results
    assert sorted(p.name for p in tmp_path.iterdir()) == [RESULTS_FILE]


def test_renderers_show_the_line_they_are_given_and_nothing_when_complete() -> None:
    results = sample_results()
    line = "INCOMPLETE: 3 of at least 734 cases have results (the run was interrupted)"
    partial = judge(interrupted(known=734, done=3), results[:3])
    complete = judge(finished(results), results)
    assert markdown.render(results[:3], DECLARED, partial).splitlines()[2] == f"**{line}**"
    page = html.render(results[:3], DECLARED, partial)
    assert f'<p id="completeness" class="c-incomplete">{line}</p>' in page
    assert terminal.render(results[:3], "out", partial).splitlines()[-1] == line
    assert markdown.render(results, DECLARED, complete) == markdown.render(results, DECLARED)
    assert html.render(results, DECLARED, complete) == html.render(results, DECLARED)
    unknown = judge(None, results)
    assert 'class="c-unknown">completeness unknown' in html.render(results, DECLARED, unknown)
