"""I/O-error faults: their case ids, enumeration, strace options, the failed-sync loss, the agent's stop."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from crashmatrix.agent.log import SessionLog, StorageFailed, read_commits
from crashmatrix.agent.records import Intent, run_started
from crashmatrix.harness.enumeration import extensions, single_crash_cases
from crashmatrix.harness.execution.fs_inject import SHOWN, inject_args, injected
from crashmatrix.harness.execution.fs_trace import parse
from crashmatrix.harness.faults.interface import injecting
from crashmatrix.harness.faults.io_error import EIO_FSYNC, ENOSPC_WRITE, SHORT_COUNT, SHORT_WRITE
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.short_write import Prefix, Unmodelled, put_back, short_write
from crashmatrix.harness.faults.sync_loss import lose, sync_loss
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.fs_calls import FsCall, Syscall
from crashmatrix.harness.verify import InvariantId
from crashmatrix.harness.verify.retry_intent import check_retry_intent
from crashmatrix.scenarios.model import BoundaryKind as K
from tests.support.observations import ObservationBuilder, changelog_baseline, changelog_scenario, check, ids

LOG = "/s/session.jsonl"
POINTS = ["recovery.branch:x", "commit.before:a", "commit.written:a", "commit.after:a",
          "effect.before:t", "commit.before:b", "commit.written:b", "commit.after:b"]


def test_a_case_id_names_the_call_the_file_and_the_fault_and_round_trips() -> None:
    (case, _) = single_crash_cases("changelog", POINTS, [EIO_FSYNC])
    assert case.case_id == "changelog/01:fsync:session.jsonl/eio-fsync"
    assert Case.parse(case.case_id) == case
    assert Case.parse("changelog/15:effect.after:append_note/kill").schedule[0].fault == "kill"


def test_a_case_per_commit_sync_and_write_after_the_probe_crash_points_and_never_deeper() -> None:
    cases = [c.case_id for c in single_crash_cases("s", POINTS, [KILL, ENOSPC_WRITE, SHORT_WRITE])]
    assert len(cases) == len(POINTS) + 4
    assert cases[-4:] == ["s/01:write:session.jsonl/enospc-write", "s/02:write:session.jsonl/enospc-write",
                          "s/01:write:session.jsonl/short-write", "s/02:write:session.jsonl/short-write"]
    first = Case.parse("s/03:commit.written:a/kill")
    deeper = extensions(first, [POINTS[:3], POINTS], [KILL, EIO_FSYNC])
    assert deeper
    assert all(c.schedule[-1].fault == "kill" for c in deeper)


def test_the_injection_options_count_only_the_files_calls() -> None:
    assert inject_args(Path("/s/session.jsonl"), "fsync", "error=EIO", 3) == [
        "-e", "signal=none", "-s", str(SHOWN), "-P", "/s/session.jsonl",
        "-e", "inject=fsync:error=EIO:when=3"]
    with pytest.raises(ValueError, match="counted from 1"):
        inject_args(Path("/s/x"), "write", "retval=0", 0)
    assert injected(["1 fsync(3</s/session.jsonl>) = -1 EIO (Input/output error) (INJECTED)\n"])
    assert not injected(["1 fsync(3</s/session.jsonl>) = 0\n"])
    for fault in (EIO_FSYNC, ENOSPC_WRITE, SHORT_WRITE):
        assert injecting(fault) is fault
        assert not fault.by_default
    assert injecting(KILL) is None
    assert [f.must_stop for f in (EIO_FSYNC, ENOSPC_WRITE, SHORT_WRITE)] == [True, True, False]


def _open() -> FsCall:
    flags = frozenset({"O_WRONLY", "O_APPEND", "O_CREAT"})
    return FsCall(1, Syscall.OPENAT, (LOG,), 3, flags=flags, result=3)


def _write(n: int) -> FsCall:
    return FsCall(1, Syscall.WRITE, (LOG,), 3, number=n, result=n)


def _sync(ok: bool) -> FsCall:
    return FsCall(1, Syscall.FSYNC, (LOG,), 3, result=0 if ok else -1, error=None if ok else "EIO")


def test_a_failed_sync_loses_its_writes_for_good_a_later_sync_does_not_bring_them_back() -> None:
    stopped = sync_loss([_open(), _write(4), _sync(True), _write(3), _sync(False)], LOG, 0)
    assert (stopped.length, stopped.holes) == (4, ())
    assert lose(b"aaa\nbb\n", stopped) == b"aaa\n"
    carried_on = sync_loss([_open(), _write(4), _sync(True), _write(3), _sync(False), _write(2),
                            _sync(True)], LOG, 0)
    assert (carried_on.length, carried_on.holes) == (9, ((4, 3),))
    assert lose(b"aaa\nbb\nc\n", carried_on) == b"aaa\n\0\0\0c\n"
    clean = sync_loss([_open(), _write(4), _sync(True), _write(3)], LOG, 0)
    assert not clean.changes
    assert clean.length == 7


def test_the_log_stops_for_good_on_a_failed_sync_naming_the_file_and_errno(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = SessionLog(tmp_path / "session.jsonl", fsync=True)
    log.open()
    log.commit([run_started("run-1", Intent.PROMPT)])

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(StorageFailed) as failed:
        log.commit([run_started("run-2", Intent.PROMPT)])
    assert "fsync of" in str(failed.value)
    assert "session.jsonl" in str(failed.value)
    assert "EIO" in str(failed.value)
    assert [c.seq for c in log.commits] == [1]  # not taken as saved
    monkeypatch.undo()
    with pytest.raises(StorageFailed):  # no retry on top of a commit whose fate is unknown
        log.commit([run_started("run-3", Intent.PROMPT)])
    log.close()
    assert len(read_commits(tmp_path / "session.jsonl")[0]) == 2  # the page cache still has it


def test_liveness_an_agent_failed_a_storage_call_must_stop_with_an_error() -> None:
    obs = changelog_baseline()
    first = obs.incarnations[0]
    first.injected, first.must_stop, first.exit_code = "fsync 3 of session.jsonl: error=EIO", True, 0
    assert InvariantId.LIVENESS in ids(check(obs))
    first.exit_code = 4
    assert InvariantId.LIVENESS not in ids(check(obs))
    first.must_stop, first.exit_code = False, 0  # a short write: the agent writes the rest, goes on
    assert InvariantId.LIVENESS not in ids(check(obs))


def test_a_retry_record_whose_commit_failed_is_owed_by_recovery_as_after_a_kill() -> None:
    b = ObservationBuilder()
    b.start()
    b.poll()
    b.request(500, "http_500")
    b.event(K.COMMIT_BEFORE, "retry_pending", seq=b.next_seq)  # its write failed: ENOSPC
    obs = b.build()
    first = obs.incarnations[0]
    first.exit_code = 4
    scenario = changelog_scenario()
    assert check_retry_intent(obs, scenario)  # it stopped by itself, for no reason the case gave
    first.injected, first.must_stop = "write 2 of session.jsonl: error=ENOSPC", True
    assert first.interrupted
    assert check_retry_intent(obs, scenario) == []


# -- short-write: a real prefix written, the short count returned ---------------------------------
# What strace prints of a log's calls when its 2nd write is made short (`retval=16`): the call was
# skipped (16 bytes claimed, none written); the writer goes on after it.
LOG_FD = "3</s/session.jsonl>"
SHORT_TRACE = [
    f'1 openat(AT_FDCWD</s>, "/s/session.jsonl", O_WRONLY|O_CREAT|O_APPEND, 0644) = {LOG_FD}',
    f'1 write({LOG_FD}, "{{\\"seq\\":1}}\\n", 10) = 10',
    f'1 write({LOG_FD}, "{{\\"seq\\":2,\\"entries\\":[\\"\\303\\251t\\303\\251\\"]}}\\n", 30)'
    " = 16 (INJECTED)",
]


def _line(n: int) -> bytes:
    return f'{{"seq":{n},"entries":["été"]}}\n'.encode()


def test_the_short_write_is_parsed_with_the_bytes_strace_printed_and_marked_injected() -> None:
    [_, first, short] = parse(SHORT_TRACE)
    assert (first.injected, first.head) == (False, b'{"seq":1}\n')
    assert short.injected
    assert (short.number, short.result) == (30, 16)
    assert short.head == _line(2)
    assert SHORT_WRITE.how == f"retval={SHORT_COUNT}"
    assert 0 < SHORT_COUNT <= SHOWN  # the prefix is among the bytes strace prints


def test_the_prefix_goes_where_the_short_write_landed_whatever_the_agent_did_next() -> None:
    before = b'{"seq":0}\n'
    # Then the rest (14 bytes) and a third commit: appends after the short one, 16 bytes early.
    rest = [*SHORT_TRACE, f'1 write({LOG_FD}, "x", 14) = 14', f'1 write({LOG_FD}, "y", 10) = 10']
    found = short_write(parse(rest), LOG, len(before))
    assert found == Prefix(offset=20, data=_line(2)[:16], asked=30)
    # The file an agent that wrote the rest left: whole again, byte for byte what a real one is.
    left = before + b'{"seq":1}\n' + _line(2)[16:] + b'{"seq":3}\n'
    assert put_back(left, found) == before + b'{"seq":1}\n' + _line(2) + b'{"seq":3}\n'
    # One that took the write for complete: commit 2 cut short, commit 3 appended to its half.
    careless = before + b'{"seq":1}\n' + b'{"seq":3}\n'
    assert put_back(careless, found) == before + b'{"seq":1}\n' + _line(2)[:16] + b'{"seq":3}\n'


def test_a_short_write_of_nothing_puts_nothing_back_and_what_cannot_be_followed_says_so() -> None:
    nothing = [*SHORT_TRACE[:2], SHORT_TRACE[2].replace("= 16 (INJECTED)", "= 0 (INJECTED)")]
    assert short_write(parse(nothing), LOG, 0) is None  # the old fault: no prefix to put back
    assert short_write(parse(SHORT_TRACE[:2]), LOG, 0) is None  # none injected
    cut = [*SHORT_TRACE, f"1 ftruncate({LOG_FD}, 10) = 0"]
    assert short_write(parse(cut), LOG, 0) == Unmodelled("the file was truncated after the short write")
    positioned = [SHORT_TRACE[0].replace("O_APPEND", "O_RDWR"), *SHORT_TRACE[1:]]
    assert isinstance(short_write(parse(positioned), LOG, 0), Unmodelled)


def test_a_write_shorter_than_the_short_count_is_put_back_whole() -> None:
    tiny = [SHORT_TRACE[0], f'1 write({LOG_FD}, "{{}}\\n", 3) = 16 (INJECTED)']
    assert short_write(parse(tiny), LOG, 0) == Prefix(offset=0, data=b"{}\n", asked=3)
