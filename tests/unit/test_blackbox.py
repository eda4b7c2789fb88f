"""Black-box mode's pure parts: step ids, enumeration, store calls in a trace, judging without probes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from crashmatrix.harness.enumeration import blackbox_cases
from crashmatrix.harness.execution.blackbox import kill_args, landed, store_points
from crashmatrix.harness.execution.fs_trace import parse
from crashmatrix.harness.faults.interface import at_store_calls_of
from crashmatrix.harness.faults.io_error import EIO_FSYNC
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.power import POWER
from crashmatrix.harness.faults.second import SECOND
from crashmatrix.harness.faults.torn import TORN
from crashmatrix.harness.records.blackbox_points import refused
from crashmatrix.harness.records.case import Case, CaseIdError, CrashStep
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.uncrashed import uncrashed
from crashmatrix.harness.records.violation import InvariantId as Id
from crashmatrix.harness.verify import judge
from crashmatrix.harness.verify.checks import FROM_PROBES, PARTLY_FROM_PROBES
from crashmatrix.harness.verify.exercised import exercised
from tests.support.observations import (
    changelog_scenario,
    ids,
    lost_intent_builder,
    lying_success_builder,
)

SESSION = Path("/s/case/session")


def test_a_black_box_step_round_trips_through_its_id() -> None:
    case = Case.parse("changelog/b03:fsync:session.jsonl/kill")
    assert case.schedule == (CrashStep(3, "fsync", "session.jsonl", "kill", blackbox=True),)
    assert case.blackbox
    assert case.case_id == "changelog/b03:fsync:session.jsonl/kill"
    probe = Case.parse("changelog/03:commit.after:x/kill")
    assert not probe.blackbox
    assert probe.case_id == "changelog/03:commit.after:x/kill"
    assert Case.parse("s/b12:rename:inbox/x.tmp/kill").schedule[0].label == "inbox/x.tmp"


@pytest.mark.parametrize("bad", ["s/bx:fsync:f/kill", "s/b:fsync:f/kill", "s/c03:fsync:f/kill"])
def test_a_malformed_black_box_step_is_refused(bad: str) -> None:
    with pytest.raises(CaseIdError, match="bNN:syscall:file/fault"):
        Case.parse(bad)


def test_only_a_plain_kill_acts_at_store_calls() -> None:
    assert [f.name for f in (KILL, TORN, POWER, SECOND, EIO_FSYNC) if at_store_calls_of(f)] == ["kill"]

    class Old:  # a plugin written before the member existed
        name = "old"

    assert not at_store_calls_of(Old())  # type: ignore[arg-type]


def test_cases_count_each_syscall_per_file_in_the_order_the_calls_were_made() -> None:
    calls = ["write:session.jsonl", "fsync:session.jsonl", "write:session.jsonl", "fsync:.",
             "write:session.jsonl", "rename:config.tmp"]
    got = [c.case_id for c in blackbox_cases("s", calls, [KILL, TORN])]
    assert got == ["s/b01:write:session.jsonl/kill", "s/b01:fsync:session.jsonl/kill",
                   "s/b02:write:session.jsonl/kill", "s/b01:fsync:./kill",
                   "s/b03:write:session.jsonl/kill", "s/b01:rename:config.tmp/kill"]


TRACE = [
    '7 openat(AT_FDCWD</s/case>, "/s/case/session/session.jsonl", O_WRONLY|O_CREAT|O_APPEND, 0644)'
    ' = 4</s/case/session/session.jsonl>',
    '7 write(4</s/case/session/session.jsonl>, "{}\\n", 3) = 3',
    '7 write(1<pipe:[99]>, "hello\\n", 6) = 6',
    '7 write(5</s/case/ws/CHANGELOG.md>, "x\\n", 2) = 2',
    '7 fsync(4</s/case/session/session.jsonl>) = 0',
    '7 fsync(6</s/case/session>) = 0',
    '7 rename("/s/case/session/config.tmp", "/s/case/session/config.json") = 0',
    '7 close(4</s/case/session/session.jsonl>) = 0',
]


def test_store_points_are_the_changing_calls_on_files_under_the_session_directory() -> None:
    # The append-mode open is counted (strace's ordinal for a later truncating open counts it),
    # not a crash point.
    assert store_points(parse(TRACE), SESSION) == [
        "~openat:session.jsonl", "write:session.jsonl", "fsync:session.jsonl", "fsync:.",
        "rename:config.tmp"]


TRUNCATING = [
    '7 openat(AT_FDCWD</s/case>, "/s/case/session/items.json", O_RDONLY) = 4</s/case/session/items.json>',
    '7 openat(AT_FDCWD</s/case>, "/s/case/session/items.json", O_WRONLY|O_CREAT|O_TRUNC, 0666)'
    ' = 5</s/case/session/items.json>',
    '7 write(5</s/case/session/items.json>, "[]", 2) = 2',
    '7 openat(AT_FDCWD</s/case/session>, "items.json", O_WRONLY|O_CREAT|O_TRUNC, 0666)'
    ' = 6</s/case/session/items.json>',
]


def test_a_truncating_open_is_a_crash_point_counted_among_the_files_opens() -> None:
    """It empties the file: the 2nd openat of items.json (the read-only one counts: strace's
    ordinal does). An open by a relative path is neither: strace's -P cannot match it."""
    points = store_points(parse(TRUNCATING), SESSION)
    assert points == ["~openat:items.json", "openat:items.json", "write:items.json"]
    cases = blackbox_cases("s", points, [KILL])
    assert [c.case_id for c in cases] == ["s/b02:openat:items.json/kill", "s/b01:write:items.json/kill"]
    assert "inject=openat:signal=KILL:when=2" in kill_args(SESSION, "openat", "items.json", 2)


THREADED = [
    '7 write(4</s/case/session/db.sqlite>, "a", 1) = 1',
    '9 write(4</s/case/session/db.sqlite>, "b", 1) = 1',
    '7 fsync(4</s/case/session/db.sqlite>) = 0',
    '7 write(5</s/case/session/log>, "c", 1) = 1',
]


def test_a_file_stored_to_from_several_threads_is_refused_with_its_call_count() -> None:
    """strace counts per thread: the n-th write of db.sqlite is another write in another run
    (DBOS's executor, Node's workers), so it is no crash point, and the run can say why."""
    points = store_points(parse(THREADED), SESSION)
    assert points == ["!write:db.sqlite", "!write:db.sqlite", "!fsync:db.sqlite", "write:log"]
    assert refused(points) == {"db.sqlite": 3}
    assert [c.case_id for c in blackbox_cases("s", points, [KILL])] == ["s/b01:write:log/kill"]


def test_a_black_box_run_with_only_refused_calls_says_why_nothing_crashed() -> None:
    only_shared = CaseResult("s/none", "s", 0, Verdict.PASS,
                             store_calls=[store_points(parse(THREADED[:3]), SESSION)])
    why = uncrashed([only_shared])["s"]
    assert "several threads (db.sqlite (3 calls))" in why

def test_a_kill_landed_only_when_its_call_never_returned() -> None:
    killed = ['7 write(4</s/case/session/session.jsonl>, "a", 1) = 1',
              '7 write(4</s/case/session/session.jsonl>, "b", 1) = ?']
    assert landed(parse(killed), SESSION, "write", "session.jsonl", 2)
    assert not landed(parse(killed), SESSION, "write", "session.jsonl", 1)  # it returned
    assert not landed(parse(killed), SESSION, "write", "session.jsonl", 3)  # never made
    assert not landed(parse(killed), SESSION, "fsync", "session.jsonl", 1)


def test_the_kill_is_strace_signalling_the_nth_call_on_that_file() -> None:
    args = kill_args(SESSION, "fsync", "session.jsonl", 3)
    assert args[args.index("-P") + 1] == "/s/case/session/session.jsonl"
    assert "inject=fsync:signal=KILL:when=3" in args


def test_without_probes_the_invariants_read_from_probes_are_not_applicable() -> None:
    """durable-commits fires on this observation with probes; without them it is not judged."""
    obs = lost_intent_builder().build()
    assert Id.DURABLE_COMMITS in ids(judge(obs, changelog_scenario()).violations)
    blind = judge(dataclasses.replace(obs, probes=False), changelog_scenario())
    assert Id.DURABLE_COMMITS not in ids(blind.violations)
    whole = {n.invariant for n in blind.not_applicable if not n.partly}
    part = {n.invariant for n in blind.not_applicable if n.partly}
    assert set(FROM_PROBES) <= whole
    assert set(PARTLY_FROM_PROBES) <= part
    assert all("without probes (--black-box)" in n.reason for n in blind.not_applicable
               if n.invariant in FROM_PROBES or n.invariant in PARTLY_FROM_PROBES)


def test_without_probes_a_successful_result_is_not_blamed_for_a_missing_effect_probe() -> None:
    obs = lying_success_builder().build()
    assert Id.NO_SILENT_SUCCESS in ids(judge(obs, changelog_scenario()).violations)
    blind = dataclasses.replace(obs, probes=False,
                                incarnations=[dataclasses.replace(i, events=[]) for i in obs.incarnations])
    assert Id.NO_SILENT_SUCCESS not in ids(judge(blind, changelog_scenario()).violations)


def test_without_probes_effects_and_recovered_requests_are_seen_from_the_harness_evidence() -> None:
    obs = lost_intent_builder().build()
    blind = dataclasses.replace(obs, probes=False,
                                incarnations=[dataclasses.replace(i, events=[]) for i in obs.incarnations])
    assert {Id.AT_MOST_ONCE, Id.CONTINUATION} <= exercised(obs)
    assert {Id.AT_MOST_ONCE, Id.CONTINUATION} <= exercised(blind)
    no_results = [m for m in blind.transcript.messages if m.role != "tool"]
    unchanged = dataclasses.replace(blind, workspace_after=blind.workspace_before,
                                    transcript=dataclasses.replace(blind.transcript, messages=no_results))
    assert Id.AT_MOST_ONCE not in exercised(unchanged)


def test_without_probes_and_without_a_store_each_invariant_is_listed_once() -> None:
    obs = dataclasses.replace(lost_intent_builder().build(), probes=False, store_read=False)
    listed = [n.invariant for n in judge(obs, changelog_scenario()).not_applicable]
    assert len(listed) == len(set(listed))
    at_most_once = next(n for n in judge(obs, changelog_scenario()).not_applicable
                        if n.invariant is Id.AT_MOST_ONCE)
    assert "no 'store' capability" in at_most_once.reason
    assert "without probes" in at_most_once.reason
    assert Id.SCENARIO_ORACLE in {n.invariant for n in judge(dataclasses.replace(obs, store_read=True),
                                                              changelog_scenario()).not_applicable}


def test_an_open_from_another_thread_makes_the_file_refused_not_miscounted() -> None:
    """strace's ordinal for the truncating open counts the thread's own opens only: with a
    read-only open on another thread before it, no ordinal names it in every run."""
    calls = parse([
        '11 openat(AT_FDCWD</s/case>, "/s/case/session/a.json", O_RDONLY) = 4</s/case/session/a.json>',
        '22 openat(AT_FDCWD</s/case>, "/s/case/session/a.json", O_WRONLY|O_TRUNC)'
        ' = 5</s/case/session/a.json>',
        '22 write(5</s/case/session/a.json>, "{}", 2) = 2',
    ])
    points = store_points(calls, SESSION)
    assert blackbox_cases("s", points, [KILL]) == []
    assert refused(points) == {"a.json": 3}


def test_a_rename_by_a_relative_path_is_no_crash_point() -> None:
    calls = parse(['7 rename("config.tmp", "config.json") = 0'])
    assert calls[0].relative
    assert store_points(calls, SESSION) == []


def test_a_store_file_with_a_plus_in_its_name_gives_an_id_that_parses_back_to_it() -> None:
    """Case ids join steps with `+`: the file `a+b%.json` is spelt `a%2Bb%25.json` there, and
    the kill is aimed at the file itself."""
    calls = parse(['7 write(4</s/case/session/a+b%.json>, "x", 1) = 1'])
    points = store_points(calls, SESSION)
    assert points == ["write:a%2Bb%25.json"]
    (case,) = blackbox_cases("s", points, [KILL])
    assert Case.parse(case.case_id) == case
    args = kill_args(SESSION, "write", case.schedule[0].label, 1)
    assert args[args.index("-P") + 1] == "/s/case/session/a+b%.json"
