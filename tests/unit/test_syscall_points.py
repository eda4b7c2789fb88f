"""System-call points, probes on (`--syscalls`): which calls are crash points, counts, ids, enumeration."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.enumeration import extensions, single_crash_cases, syscall_steps
from crashmatrix.harness.execution.fs_trace import parse
from crashmatrix.harness.execution.syscall_points import kill_args, landed, points
from crashmatrix.harness.faults.interface import at_syscall_points_of
from crashmatrix.harness.faults.io_error import EIO_FSYNC
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.power import POWER, POWER_KEEP1
from crashmatrix.harness.faults.second import SECOND
from crashmatrix.harness.faults.torn import TORN
from crashmatrix.harness.records.case import Case, CrashStep

SESSION = Path("/s/case/session")
EVENTS = 9  # the probe channel's descriptor in the traced agent


def _event(name: str, pid: int = 7) -> str:
    return f'{pid} write({EVENTS}<pipe:[4242]>, "{{\\"kind\\": \\"{name}\\"}}\\n", 20) = 20'


# Pid 7 is the agent's main thread (it makes the first call). A lock written before any event, a
# commit (before, write, written, fsync, after), then a settings file replaced by temporary file
# and rename with no event in between; a line printed, a tool's child writing its own file, and
# a thread writing the session's lock.
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
    '10 write(3</s/case/session/lock>, "x", 1) = 1',
]


def test_each_store_call_is_numbered_among_all_the_main_thread_s_calls_of_its_kind() -> None:
    # Writes count the probe events, the printed line and the commit; the child's (pid 8) do not.
    # The thread's write (pid 10) cannot be counted: refused. A call with a probe event just
    # before it and no store call between is the state a kill at that event leaves: SAME.
    assert points(parse(TRACE), SESSION, EVENTS) == [
        "1:pwrite64:lock", "=2:write:log", "=1:fsync:log", "=2:openat:cfg.tmp", "6:write:cfg.tmp",
        "1:rename:cfg.tmp", "!0:write:lock"]


def test_only_the_new_states_become_steps_for_each_fault_that_can_act_at_a_call() -> None:
    steps = syscall_steps(points(parse(TRACE), SESSION, EVENTS), [KILL, TORN, POWER])
    assert [s.token() for s in steps] == [
        "s01:pwrite64:lock/kill", "s01:pwrite64:lock/power", "s06:write:cfg.tmp/kill",
        "s06:write:cfg.tmp/power", "s01:rename:cfg.tmp/kill", "s01:rename:cfg.tmp/power"]
    assert all(s.syscall and s.at_call and not s.blackbox for s in steps)


def test_a_kill_or_a_power_loss_acts_at_a_call_a_tear_a_freeze_or_an_injected_error_does_not() -> None:
    assert [f.name for f in (KILL, POWER, POWER_KEEP1, TORN, SECOND, EIO_FSYNC)
            if at_syscall_points_of(f)] == ["kill", "power", "power-keep1"]


def test_the_kill_counts_the_main_thread_whole_and_landed_checks_the_file_and_the_death() -> None:
    assert kill_args("write", 6) == ["-e", "signal=none", "-e", "inject=write:signal=KILL:when=6"]
    killed = [*TRACE[:10], '7 write(5</s/case/session/cfg.tmp>, "{}", 2 <unfinished ...>']
    calls = [c for c in parse(killed) if c.pid == 7]
    assert landed(calls, SESSION, "write", "cfg.tmp", 6) is None
    assert "was on log, not cfg.tmp" in str(landed(calls, SESSION, "write", "cfg.tmp", 2))
    assert "fewer than 9" in str(landed(calls, SESSION, "write", "cfg.tmp", 9))
    assert "returned" in str(landed(calls, SESSION, "pwrite64", "lock", 1))


def test_a_system_call_step_round_trips_through_its_id_and_is_not_a_black_box_one() -> None:
    case = Case.parse("changelog/05:commit.before:x/kill+s02:write:session.jsonl/power")
    assert case.schedule[1] == CrashStep(2, "write", "session.jsonl", "power", syscall=True)
    assert not case.blackbox, "a system-call step keeps the probes on"
    assert Case.parse(case.case_id) == case


def test_recordings_and_recoveries_give_system_call_cases_after_the_event_cases() -> None:
    listed = points(parse(TRACE), SESSION, EVENTS)
    trace = ["commit.before:x", "commit.written:x", "commit.after:x"]
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


def test_an_arrival_variant_gets_no_system_call_cases() -> None:
    listed = points(parse(TRACE), SESSION, EVENTS)
    trace = ["commit.before:x", "commit.after:x", "inbox.poll:inbox"]
    cases = single_crash_cases("s~i@commit.after:x", trace, [KILL], store_calls=listed)
    assert cases
    assert not any(s.syscall for c in cases for s in c.schedule)
