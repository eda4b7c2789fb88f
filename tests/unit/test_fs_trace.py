"""strace's output parsed into file-system call records: a captured trace of our agent, and line shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.execution.fs_trace import TracerMissing, parse, parse_file, strace_path
from crashmatrix.harness.records.fs_calls import FsCall, Syscall

SAMPLE = Path(__file__).resolve().parents[1] / "support" / "strace" / "power-commit-written.txt"


def test_the_captured_trace_of_a_power_case_reads_as_the_agents_calls_in_order() -> None:
    calls = parse_file(SAMPLE)
    session = [c for c in calls if any(p.startswith("/CASE/session") for p in c.paths)]
    assert [(c.syscall.value, c.paths[0].removeprefix("/CASE/")) for c in session[:4]] == [
        ("mkdir", "session"), ("openat", "session/session.lock"), ("ftruncate", "session/session.lock"),
        ("pwrite64", "session/session.lock")]
    opened = next(c for c in session if c.paths == ("/CASE/session/session.jsonl",))
    assert opened.syscall is Syscall.OPENAT
    assert opened.fd == 4
    assert {"O_WRONLY", "O_CREAT", "O_APPEND"} <= opened.flags
    writes = [c for c in calls if c.syscall is Syscall.WRITE and c.paths == ("/CASE/session/session.jsonl",)]
    assert [(w.number, w.result) for w in writes] == [(267, 267), (281, 281), (237, 237)]
    syncs = [c.paths[0] for c in calls if c.syscall is Syscall.FSYNC]
    assert syncs == ["/CASE", "/CASE/session", "/CASE/session/session.jsonl", "/CASE/session/session.jsonl"]
    rename = next(c for c in calls if c.syscall is Syscall.RENAME)
    assert rename.paths == ("/CASE/session/config.tmp", "/CASE/session/config.json")
    pwrite = next(c for c in calls if c.syscall is Syscall.PWRITE64)
    assert (pwrite.number, pwrite.result) == (0, 564)  # the offset, and bytes written
    lseek = next(c for c in calls if c.syscall is Syscall.LSEEK and c.paths == ("/CASE/session/config.tmp",))
    assert lseek.result == 0
    # The kill line is no call.
    assert all(c.pid == 10702 for c in calls)


def test_a_failed_call_keeps_its_errno_and_the_path_it_asked_for() -> None:
    [call] = parse(['7 openat(AT_FDCWD</w>, "s/x.json", O_RDONLY|O_CLOEXEC) = -1 ENOENT (No such file)\n'])
    assert call == FsCall(7, Syscall.OPENAT, ("/w/s/x.json",), None, frozenset({"O_RDONLY", "O_CLOEXEC"}),
                          result=-1, error="ENOENT", relative=True)
    assert not call.ok


def test_an_unfinished_call_is_joined_with_its_resumption_and_a_call_cut_by_death_has_no_result() -> None:
    calls = parse([
        '5 write(3</s/log>, "abc", 3 <unfinished ...>\n',
        '6 fsync(4</s/other>) = 0\n',
        '5 <... write resumed>) = 3\n',
        '6 write(4</s/other>, "xy", 2 <unfinished ...>\n',
        '6 +++ killed by SIGKILL +++\n',
    ])
    assert [(c.pid, c.syscall.value, c.result) for c in calls] == [
        (6, "fsync", 0), (5, "write", 3), (6, "write", None)]


def test_escaped_paths_and_relative_names_resolve_against_the_working_directory() -> None:
    calls = parse([
        '1 openat(AT_FDCWD</tmp/d\\303\\251>, "a\\76b", O_RDONLY) = 3</tmp/d\\303\\251/a\\76b>\n',
        '1 rename("old", "new") = 0\n',
        '1 fsync(3</tmp/d\\303\\251/a\\76b (deleted)>) = 0\n',
        '1 renameat2(AT_FDCWD</tmp>, "x", 5</tmp/y>, "z", RENAME_EXCHANGE) = 0\n',
        '1 unlinkat(AT_FDCWD</tmp>, "gone", AT_REMOVEDIR) = 0\n',
        '1 ftruncate(3</tmp/f>, 12) = 0\n',
    ])
    assert calls[0].paths == ("/tmp/dé/a>b",)
    assert calls[1].paths == ("/tmp/dé/old", "/tmp/dé/new")  # cwd learnt from AT_FDCWD<...>
    assert calls[2].paths == ("/tmp/dé/a>b",)
    assert calls[3].paths == ("/tmp/x", "/tmp/y/z")
    assert calls[3].flags == frozenset({"RENAME_EXCHANGE"})
    assert calls[4].flags == frozenset({"AT_REMOVEDIR"})
    assert calls[5].number == 12


def test_a_write_whose_data_holds_a_closing_paren_and_equals_is_one_call() -> None:
    [call] = parse(['2 write(1</o>, "f(x) = 1, g", 11) = 11\n'])
    assert (call.paths, call.number, call.result) == (("/o",), 11, 11)


def test_a_missing_strace_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TracerMissing, match="apt-get install strace"):
        strace_path()
