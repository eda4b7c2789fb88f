"""System-call points, probes on (`--syscalls`): which calls are crash points, counts, ids, enumeration."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.adapters.durable import ADAPTER as DURABLE
from crashmatrix.harness.enumeration import (
    crash_loop_extension,
    extensions,
    single_crash_cases,
    syscall_steps,
)
from crashmatrix.harness.execution.fs_trace import parse
from crashmatrix.harness.execution.syscall_points import kill_args, landed, points
from crashmatrix.harness.faults.interface import at_syscall_points_of
from crashmatrix.harness.faults.io_error import EIO_FSYNC
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.power import POWER, POWER_KEEP1
from crashmatrix.harness.faults.registry import check_faults
from crashmatrix.harness.faults.second import SECOND
from crashmatrix.harness.faults.torn import TORN
from crashmatrix.harness.records.case import Case, CaseIdError, CrashStep
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.uncrashed import syscall_refusals

SESSION = Path("/s/case/session")
EVENTS = 9  # the probe channel's descriptor in the traced agent


def _event(name: str, pid: int = 7) -> str:
    return f'{pid} write({EVENTS}<pipe:[4242]>, "{{\\"kind\\": \\"{name}\\"}}\\n", 20) = 20'


# Pid 7 is the agent's main thread (it makes the first call). A lock written before any event, a
# commit (before, write, written, fsync, after), then a settings file replaced by temporary file
# and rename with no event in between; a line printed, a tool's child writing its own file.
TRACE = [
    '7 openat(AT_FDCWD</s/case>, "/s/case/session/lock", O_WRONLY|O_CREAT, 0644) = 3</s/case/session/lock>',
    '7 pwrite64(3</s/case/session/lock>, "pid 7", 5, 0) = 5',
    _event("commit.before"),
    '7 write(4</s/case/session/log>, "{}\\n", 3) = 3',
    _event("commit.written"),
    '7 fsync(4</s/case/session/log>) = 0',
    _event("commit.after"),
    '8 write(1</s/case/ws/out>, "child", 5) = 5',
    '7 openat(AT_FDCWD</s/case>, "/s/case/session/cfg.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0644)'
    ' = 5</s/case/session/cfg.tmp>',
    '7 write(1</s/case/inc1.log>, "saving\\n", 7) = 7',
    '7 write(5</s/case/session/cfg.tmp>, "{}", 2) = 2',
    '7 rename("/s/case/session/cfg.tmp", "/s/case/session/cfg") = 0',
]
EVENTS_SEEN = ["commit.before:x", "commit.written:x", "commit.after:x"]
# A thread (pid 10) that appends to a file of its own, and to the log the main thread writes.
THREADED = [*TRACE, '10 write(6</s/case/session/side>, "x", 1) = 1',
            '10 write(4</s/case/session/log>, "y", 1) = 1']


def test_each_store_call_is_numbered_among_all_the_main_thread_s_calls_of_its_kind() -> None:
    # Writes count the probe events, the printed line and the commit; the child's (pid 8) do not.
    # A call with a probe event just before it and no change to the session between the two is
    # the state a crash at that event leaves: SAME, with that event.
    assert points(parse(TRACE), SESSION, EVENTS, EVENTS_SEEN) == [
        "1:pwrite64:lock", "=commit.before:x@2:write:log", "=commit.written:x@1:fsync:log",
        "=commit.after:x@2:openat:cfg.tmp", "6:write:cfg.tmp", "1:rename:cfg.tmp"]


def test_a_file_another_thread_stores_to_is_refused_and_its_incarnation_gets_no_power_loss() -> None:
    listed = points(parse(THREADED), SESSION, EVENTS, EVENTS_SEEN)
    assert [p for p in listed if "log" in p] == ["!2:write:log", "!1:fsync:log"]
    steps = [s.token() for s in syscall_steps(listed, [KILL, POWER])]
    assert steps == ["s01:pwrite64:lock/kill", "s06:write:cfg.tmp/kill", "s01:rename:cfg.tmp/kill"], (
        "no power: the model would not see the thread's syncs")


def test_a_file_created_after_an_event_is_a_change_the_event_does_not_stand_for() -> None:
    created = [*TRACE[:7], '7 openat(AT_FDCWD</s/case>, "/s/case/session/seg", O_WRONLY|O_CREAT|O_APPEND,'
               ' 0644) = 6</s/case/session/seg>', '7 write(6</s/case/session/seg>, "z", 1) = 1']
    assert points(parse(created), SESSION, EVENTS, EVENTS_SEEN)[-1] == "5:write:seg"


def test_only_the_new_states_become_steps_for_each_fault_not_enumerated_at_the_event() -> None:
    steps = syscall_steps(points(parse(TRACE), SESSION, EVENTS, EVENTS_SEEN), [KILL, TORN, POWER])
    # A kill is enumerated at every event; a power loss at commit.written and commit.after only,
    # so the write after commit.before is a power point of its own.
    assert [s.token() for s in steps] == [
        "s01:pwrite64:lock/kill", "s01:pwrite64:lock/power", "s02:write:log/power",
        "s06:write:cfg.tmp/kill", "s06:write:cfg.tmp/power", "s01:rename:cfg.tmp/kill",
        "s01:rename:cfg.tmp/power"]
    assert all(s.syscall and s.at_call and not s.blackbox for s in steps)


def test_a_kill_or_a_power_loss_acts_at_a_call_a_tear_a_freeze_or_an_injected_error_does_not() -> None:
    assert [f.name for f in (KILL, POWER, POWER_KEEP1, TORN, SECOND, EIO_FSYNC)
            if at_syscall_points_of(f)] == ["kill", "power", "power-keep1"]


def test_the_kill_counts_the_main_thread_whole_and_landed_checks_the_file_and_the_death() -> None:
    assert kill_args("write", 6) == ["-e", "signal=none", "-e", "inject=write:signal=KILL:when=6"]
    # As the killed run's trace shows it: no -f, no pid column, the killed call never returning.
    killed = [line.partition(" ")[2] for line in TRACE[:10] if line.startswith("7 ")]
    killed.append('write(5</s/case/session/cfg.tmp>, "{}", 2) = ?')
    calls = parse(killed)
    assert landed(calls, SESSION, "write", "cfg.tmp", 6) is None
    assert "was on log, not cfg.tmp" in str(landed(calls, SESSION, "write", "cfg.tmp", 2))
    assert "fewer than 9" in str(landed(calls, SESSION, "write", "cfg.tmp", 9))
    assert "returned" in str(landed(calls, SESSION, "pwrite64", "lock", 1))


def test_a_count_that_drifted_onto_another_call_of_the_same_file_is_caught_by_its_ordinal() -> None:
    listed = points(parse(TRACE), SESSION, EVENTS, EVENTS_SEEN)
    steps = syscall_steps(listed, [KILL])
    assert [(s.token(), s.ordinal) for s in steps][-2:] == [("s06:write:cfg.tmp/kill", 1),
                                                            ("s01:rename:cfg.tmp/kill", 1)]
    assert steps[-2] == CrashStep(6, "write", "cfg.tmp", "kill", syscall=True), "not part of the id"
    # A run whose log write went to cfg.tmp instead: its 6th write is on cfg.tmp, but its second.
    log, cfg = "write(4</s/case/session/log>", "write(5</s/case/session/cfg.tmp>"
    killed = [line.partition(" ")[2].replace(log, cfg) for line in TRACE[:10] if line.startswith("7 ")]
    killed.append('write(5</s/case/session/cfg.tmp>, "{}", 2) = ?')
    calls = parse(killed)
    assert landed(calls, SESSION, "write", "cfg.tmp", 6) is None, "the count alone cannot tell"
    assert "was write 2 of cfg.tmp, the recording's was write 1" in str(
        landed(calls, SESSION, "write", "cfg.tmp", 6, steps[-2].ordinal))
    assert landed(calls, SESSION, "write", "cfg.tmp", 6, 2) is None


def test_a_system_call_step_round_trips_through_its_id_and_is_not_a_black_box_one() -> None:
    case = Case.parse("changelog/05:commit.before:x/kill+s02:write:session.jsonl/power")
    assert case.schedule[1] == CrashStep(2, "write", "session.jsonl", "power", syscall=True)
    assert not case.blackbox, "a system-call step keeps the probes on"
    assert Case.parse(case.case_id) == case


def test_recordings_and_recoveries_give_system_call_cases_after_the_event_cases() -> None:
    listed = points(parse(TRACE), SESSION, EVENTS, EVENTS_SEEN)
    trace = EVENTS_SEEN
    first = single_crash_cases("s", trace, [KILL], store_calls=listed)
    assert [c.case_id for c in first][-3:] == ["s/s01:pwrite64:lock/kill", "s/s06:write:cfg.tmp/kill",
                                               "s/s01:rename:cfg.tmp/kill"]
    assert len(first) == 6
    parent = first[0]
    deeper = extensions(parent, [trace, trace], [KILL], (), [[], listed])
    assert deeper[-1].case_id == "s/01:commit.before:x/kill+s01:rename:cfg.tmp/kill"
    assert len(deeper) == 6
    # No trace of the finishing incarnation (it was not traced): only its events.
    assert len(extensions(parent, [trace, trace], [KILL])) == 3


def test_a_settle_step_crashes_the_incarnation_after_the_finisher_and_is_always_last() -> None:
    settle = Case.parse("changelog/f01:write:session.jsonl/kill")
    assert settle.schedule[0] == CrashStep(1, "write", "session.jsonl", "kill", syscall=True, settle=True)
    assert Case.parse(settle.case_id) == settle
    assert settle.crashes_settle
    # The first incarnation finishes uncrashed, the second (the settle) is crashed, a third settles.
    assert [settle.step_of(i) for i in (1, 2, 3)] == [None, settle.schedule[0], None]
    deep = Case.parse("changelog/05:commit.before:x/kill+f02:ftruncate:lock/power")
    assert [deep.step_of(i) for i in (1, 2, 3, 4)] == [deep.schedule[0], None, deep.schedule[1], None]
    plain = Case.parse("changelog/05:commit.before:x/kill+s02:write:log/kill")
    assert [plain.step_of(i) for i in (1, 2, 3)] == [*plain.schedule, None]
    assert not plain.crashes_settle
    with pytest.raises(CaseIdError, match="can only be the last step"):
        Case.parse("changelog/f01:write:log/kill+s01:write:log/kill")


def test_every_call_of_a_settle_is_a_point_and_nothing_extends_a_crashed_settle() -> None:
    listed = points(parse(TRACE), SESSION, EVENTS, EVENTS_SEEN)
    trace = EVENTS_SEEN
    # A settle's events are no crash points: a call an event stands for is a settle step too.
    assert len(syscall_steps(listed, [KILL], settle=True)) == len(syscall_steps(listed, [KILL])) + 3
    first = single_crash_cases("s", trace, [KILL], store_calls=listed, settle_calls=listed)
    settles = [c for c in first if c.crashes_settle]
    assert [c.case_id for c in settles][:2] == ["s/f01:pwrite64:lock/kill", "s/f02:write:log/kill"]
    # A single crash's settle (the incarnation after its finisher) gives deeper settle cases.
    parent = first[0]
    deeper = extensions(parent, [trace, trace, trace], [KILL], (), [[], listed, listed])
    assert deeper[-1].case_id == "s/01:commit.before:x/kill+f01:rename:cfg.tmp/kill"
    assert sum(c.crashes_settle for c in deeper) == len(settles)
    assert extensions(settles[0], [trace, trace, trace], [KILL], (), [[], listed, listed]) == []
    assert crash_loop_extension(settles[0], [trace, trace, trace], 3) is None


def test_an_arrival_variant_gets_no_system_call_cases() -> None:
    listed = points(parse(TRACE), SESSION, EVENTS, EVENTS_SEEN)
    trace = ["commit.before:x", "commit.after:x", "inbox.poll:inbox"]
    cases = single_crash_cases("s~i@commit.after:x", trace, [KILL], store_calls=listed)
    assert cases
    assert not any(s.syscall for c in cases for s in c.schedule)


def test_a_system_call_step_whose_fault_cannot_act_at_a_call_is_refused_by_its_id() -> None:
    check_faults(Case.parse("s/s01:write:log/power-names"), DURABLE)
    with pytest.raises(CaseIdError, match="fault 'torn' does not act at a system call"):
        check_faults(Case.parse("s/s01:write:log/torn"), DURABLE)
    with pytest.raises(CaseIdError, match="fault 'power' does not act at a black-box store call"):
        check_faults(Case.parse("s/b01:write:log/power"), DURABLE)


def test_a_recording_that_refused_files_is_said_so_per_scenario() -> None:
    listed = points(parse(THREADED), SESSION, EVENTS, EVENTS_SEEN)
    result = CaseResult(case="s/none", scenario="s", depth=0, verdict=Verdict.PASS, syscall_points=[listed])
    assert syscall_refusals([result]) == {"s": ["log"]}
    clean = CaseResult(case="t/none", scenario="t", depth=0, verdict=Verdict.PASS,
                       syscall_points=[points(parse(TRACE), SESSION, EVENTS, EVENTS_SEEN)])
    assert syscall_refusals([clean]) == {}
