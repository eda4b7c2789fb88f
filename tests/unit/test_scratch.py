"""Where case trees are created: the override, a RAM filesystem, or the platform default."""

from __future__ import annotations

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
