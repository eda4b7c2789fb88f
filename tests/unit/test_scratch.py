"""Where case trees are created: the override, a RAM filesystem, or the platform default."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from crashmatrix.harness.execution import scratch


def test_the_environment_override_wins(tmp_path: Path) -> None:
    assert scratch.scratch_parent({"CRASHMATRIX_TMPDIR": str(tmp_path)}) == str(tmp_path)
    assert scratch.scratch_parent({"CRASHMATRIX_TMPDIR": ""}) is None


def test_a_tmpdir_the_user_set_is_honoured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(scratch, "RAM_CANDIDATES", (tmp_path,))
    assert scratch.scratch_parent({"TMPDIR": "/somewhere"}) is None
    assert scratch.scratch_parent({"TMPDIR": "/x", "CRASHMATRIX_TMPDIR": str(tmp_path)}) == str(tmp_path)


def test_a_noexec_ram_directory_is_not_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(scratch, "RAM_CANDIDATES", (tmp_path,))
    real = os.statvfs

    class NoExec:
        def __init__(self, path: object) -> None:
            self.f_flag = real(path).f_flag | os.ST_NOEXEC  # type: ignore[arg-type]

    monkeypatch.setattr(scratch.os, "statvfs", NoExec)
    assert scratch.scratch_parent({}) is None


def test_a_writable_ram_directory_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(scratch, "RAM_CANDIDATES", (tmp_path / "missing", tmp_path))
    assert scratch.scratch_parent({}) == str(tmp_path)


def test_no_usable_ram_directory_falls_back_to_the_default(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(scratch, "RAM_CANDIDATES", (tmp_path / "missing",))
    assert scratch.scratch_parent({}) is None
    monkeypatch.setattr(scratch, "RAM_CANDIDATES", (tmp_path,))
    monkeypatch.setattr(scratch, "MIN_FREE_BYTES", 1 << 62)  # too little room
    assert scratch.scratch_parent({}) is None


def test_scratch_dir_is_created_under_the_chosen_parent(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CRASHMATRIX_TMPDIR", str(tmp_path))
    with scratch.scratch_dir("crashmatrix-test-") as made:
        assert Path(made).parent == tmp_path
    assert not Path(made).exists()


def test_scratch_dir_is_named_after_this_process_and_a_sweep_leaves_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CRASHMATRIX_TMPDIR", str(tmp_path))
    with scratch.scratch_dir("crashmatrix-explore-") as made:
        assert Path(made).name.startswith(f"crashmatrix-explore-{os.getpid()}-")
        assert scratch.sweep_stale(str(tmp_path)) == []
        assert Path(made).is_dir()


def _no_such_pid() -> int:
    """A pid no process can have: above the kernel's limit."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_a_sweep_removes_only_our_unlocked_trees_of_dead_harnesses(tmp_path: Path) -> None:
    dead = _no_such_pid()
    stale = [tmp_path / f"crashmatrix-{dead}-ab_cd123", tmp_path / f"crashmatrix-mutants-{dead}-x1y2z3w4"]
    for tree in stale:
        (tree / "case" / "ws").mkdir(parents=True)
        (tree / "case" / "ws" / "f.txt").write_text("x")
    live = tmp_path / f"crashmatrix-{os.getpid()}-abcd1234"  # this process: alive
    held = tmp_path / f"crashmatrix-{dead}-held1234"  # a live harness in another pid namespace
    # A user's directory whose name fits the pattern, but that holds no marker of ours.
    users = tmp_path / f"crashmatrix-{dead}-myoutput"
    foreign = [tmp_path / "crashmatrix-repro-abcd1234", tmp_path / f"other-{dead}-abcd1234",
               tmp_path / f"crashmatrix-{dead}", users]
    for d in [live, held, *foreign]:
        d.mkdir()
    for tree in [*stale, live, held, *foreign[:3]]:
        (tree / scratch.MARKER).write_text("1\n")
    (users / "keep.txt").write_text("the user's")
    (tmp_path / f"crashmatrix-{dead}-file1234").write_text("not a directory")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("x")
    (tmp_path / f"crashmatrix-{dead}-link1234").symlink_to(elsewhere)
    lock = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        removed = scratch.sweep_stale(str(tmp_path))
    finally:
        os.close(lock)
    assert sorted(removed) == sorted(str(t) for t in stale)
    assert not any(t.exists() for t in stale)
    assert all(d.is_dir() for d in [live, held, *foreign])
    assert (tmp_path / f"crashmatrix-{dead}-file1234").exists()
    assert (elsewhere / "keep.txt").exists()
    assert scratch.sweep_stale(str(tmp_path)) == [str(held)]  # its lock is gone: now it is stale


def test_a_new_scratch_dir_sweeps_the_stale_trees_beside_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CRASHMATRIX_TMPDIR", str(tmp_path))
    stale = tmp_path / f"crashmatrix-{_no_such_pid()}-abcd1234"
    stale.mkdir()
    (stale / scratch.MARKER).write_text("1\n")
    with scratch.scratch_dir("crashmatrix-") as made:
        assert [p.name for p in tmp_path.iterdir()] == [Path(made).name]
    assert list(tmp_path.iterdir()) == []
