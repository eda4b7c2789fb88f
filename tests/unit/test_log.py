"""The session log: atomic checksummed commits, torn-tail repair, refusal of middle damage, lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.agent.lock import SessionLock, SessionLocked
from crashmatrix.agent.log import LogCorrupt, SessionLog, encode_commit, read_commits
from crashmatrix.agent.records import Intent, run_started


def _write(path: Path, n: int) -> None:
    log = SessionLog(path, fsync=False)
    log.open()
    for i in range(1, n + 1):
        log.commit([run_started(f"run-{i}", Intent.PROMPT)])
    log.close()


def test_commits_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    _write(path, 3)
    commits, repair = read_commits(path)
    assert repair is None
    assert [c.seq for c in commits] == [1, 2, 3]
    assert [c.entries[0]["run_id"] for c in commits] == ["run-1", "run-2", "run-3"]


def test_torn_fragment_is_truncated_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    _write(path, 2)
    good = path.read_bytes()
    path.write_bytes(good + encode_commit(3, [{"type": "notice"}])[:17])
    log = SessionLog(path, fsync=False)
    log.open()
    assert log.repair is not None
    assert log.repair.line == 3
    assert "torn" in log.repair.why
    assert path.read_bytes() == good
    assert len(log.commits) == 2
    log.commit([run_started("run-3", Intent.PROMPT)])  # appends cleanly after the repair
    log.close()
    assert [c.seq for c in read_commits(path)[0]] == [1, 2, 3]


def test_a_complete_last_line_with_a_bad_checksum_is_refused_not_dropped(tmp_path: Path) -> None:
    # A kill leaves a prefix of the one append, which has no newline: a complete bad line is an
    # acknowledged commit damaged afterwards, and dropping it would resume a finished run.
    path = tmp_path / "session.jsonl"
    _write(path, 2)
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"run-2", b"run-X")
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    log = SessionLog(path, fsync=False)
    with pytest.raises(LogCorrupt, match="line 2: checksum mismatch"):
        log.open()
    log.close()
    assert path.read_bytes() == before  # nothing changed


def test_a_last_line_with_a_zero_filled_hole_is_a_torn_write(tmp_path: Path) -> None:
    # What a power loss leaves of an unsynced append: the new length, one block never stored.
    path = tmp_path / "session.jsonl"
    _write(path, 2)
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1][:10] + b"\x00" * 8 + lines[1][18:]
    path.write_bytes(b"\n".join(lines))
    log = SessionLog(path, fsync=False)
    log.open()
    assert log.repair is not None
    assert log.repair.line == 2
    assert "NUL" in log.repair.why
    assert len(log.commits) == 1
    log.close()


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda line: line.replace(b"run-2", b"run-Z"), "checksum mismatch"),
        (lambda line: b"", "not a commit line"),
        (lambda line: line[:-3], "checksum field missing"),
    ],
)
def test_middle_damage_refuses_and_names_the_line(tmp_path: Path, damage, why) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "session.jsonl"
    _write(path, 4)
    before = path.read_bytes()
    lines = before.split(b"\n")
    lines[1] = damage(lines[1])
    damaged = b"\n".join(lines)
    path.write_bytes(damaged)
    log = SessionLog(path, fsync=False)
    with pytest.raises(LogCorrupt) as info:
        log.open()
    assert info.value.line == 2
    assert "line 2" in str(info.value)
    assert why in str(info.value)
    assert path.read_bytes() == damaged, "refusing must not change the file"


def test_sequence_gap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(encode_commit(1, [{"type": "x"}]) + encode_commit(3, [{"type": "x"}])
                     + encode_commit(4, [{"type": "x"}]))
    with pytest.raises(LogCorrupt, match="line 2: sequence number 3, expected 2"):
        read_commits(path)


def test_second_lock_names_the_holder(tmp_path: Path) -> None:
    first = SessionLock(tmp_path / "session.lock")
    first.acquire()
    try:
        with pytest.raises(SessionLocked, match=r"locked by pid \d+"):
            SessionLock(tmp_path / "session.lock").acquire()
    finally:
        first.release()
    again = SessionLock(tmp_path / "session.lock")
    again.acquire()  # free once released
    again.release()


def test_the_holder_is_named_by_its_whole_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["durable-agent", "--session", "s", "--workspace", "w", "run", "fix the login timeout"]
    monkeypatch.setattr("sys.argv", argv)
    first = SessionLock(tmp_path / "session.lock")
    first.acquire()
    try:
        with pytest.raises(SessionLocked) as err:
            SessionLock(tmp_path / "session.lock").acquire()
    finally:
        first.release()
    assert "run 'fix the login timeout'" in str(err.value)  # not cut to its first four words
