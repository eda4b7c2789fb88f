"""System-call points with probes on (`--syscalls`): which calls are new crash points, ids, enumeration."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.enumeration import extensions, single_crash_cases, syscall_steps
from crashmatrix.harness.execution.blackbox import store_points
from crashmatrix.harness.execution.fs_trace import parse
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.torn import TORN
from crashmatrix.harness.records.case import Case, CrashStep

SESSION = Path("/s/case/session")
EVENTS = 9  # the probe channel's descriptor in the traced agent


def _event(name: str) -> str:
    return f'7 write({EVENTS}<pipe:[4242]>, "{{\\"kind\\": \\"{name}\\"}}\\n", 20) = 20'


# A lock written before any event, a commit (before, write, written, fsync, after), then a
# settings file replaced by temporary file and rename with no event in between.
TRACE = [
    '7 openat(AT_FDCWD</s/case>, "/s/case/session/lock", O_WRONLY|O_CREAT, 0644) = 3</s/case/session/lock>',
    '7 pwrite64(3</s/case/session/lock>, "pid 7", 5, 0) = 5',
    _event("commit.before"),
    '7 write(4</s/case/session/log>, "{}\\n", 3) = 3',
    _event("commit.written"),
    '7 fsync(4</s/case/session/log>) = 0',
    _event("commit.after"),
    '7 openat(AT_FDCWD</s/case>, "/s/case/session/cfg.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0644)'
    ' = 5</s/case/session/cfg.tmp>',
    '7 write(5</s/case/session/cfg.tmp>, "{}", 2) = 2',
    '7 rename("/s/case/session/cfg.tmp", "/s/case/session/cfg") = 0',
    '7 write(1</s/case/inc1.log>, "done\\n", 5) = 5',
]


def test_a_call_with_a_probe_event_just_before_it_is_the_same_state_as_a_kill_at_that_event() -> None:
    points = store_points(parse(TRACE), SESSION, EVENTS)
    assert points == ["~openat:lock", "pwrite64:lock", "=write:log", "=fsync:log", "=openat:cfg.tmp",
                      "write:cfg.tmp", "rename:cfg.tmp"]


def test_without_the_event_descriptor_every_call_is_a_crash_point_as_in_black_box_mode() -> None:
    assert "=" not in "".join(store_points(parse(TRACE), SESSION))


def test_only_the_new_states_become_steps_each_counted_as_strace_counts_it() -> None:
    steps = syscall_steps(store_points(parse(TRACE), SESSION, EVENTS), [KILL, TORN])
    # torn cannot act at a system call; the SAME calls are counted (write:cfg.tmp is the 1st
    # write of that file, though the log's write came before it).
    assert [s.token() for s in steps] == ["s01:pwrite64:lock/kill", "s01:write:cfg.tmp/kill",
                                          "s01:rename:cfg.tmp/kill"]
    assert all(s.syscall and s.at_call and not s.blackbox for s in steps)


def test_a_system_call_step_round_trips_through_its_id_and_is_not_a_black_box_one() -> None:
    case = Case.parse("changelog/05:commit.before:x/kill+s02:write:session.jsonl/kill")
    assert case.schedule[1] == CrashStep(2, "write", "session.jsonl", "kill", syscall=True)
    assert not case.blackbox, "a system-call step keeps the probes on"
    assert Case.parse(case.case_id) == case


def test_recordings_and_recoveries_give_system_call_cases_after_the_event_cases() -> None:
    points = store_points(parse(TRACE), SESSION, EVENTS)
    trace = ["commit.before:x", "commit.written:x", "commit.after:x"]
    first = single_crash_cases("s", trace, [KILL], store_calls=points)
    assert [c.case_id for c in first][-3:] == ["s/s01:pwrite64:lock/kill", "s/s01:write:cfg.tmp/kill",
                                               "s/s01:rename:cfg.tmp/kill"]
    assert len(first) == 6
    parent = first[0]
    deeper = extensions(parent, [trace, trace], [KILL], (), [[], points])
    assert deeper[-1].case_id == "s/01:commit.before:x/kill+s01:rename:cfg.tmp/kill"
    assert len(deeper) == 6
    # No trace of the finishing incarnation (it was not traced): only its events.
    assert len(extensions(parent, [trace, trace], [KILL])) == 3


def test_an_arrival_variant_gets_no_system_call_cases() -> None:
    variant = "s~i@commit.after:x"
    points = store_points(parse(TRACE), SESSION, EVENTS)
    trace = ["commit.before:x", "commit.after:x", "inbox.poll:inbox"]
    cases = single_crash_cases(variant, trace, [KILL], store_calls=points)
    assert cases
    assert not any(s.syscall for c in cases for s in c.schedule)
