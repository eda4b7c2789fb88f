"""The workspace snapshot never leaves the workspace, never blocks, and never reads a huge file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crashmatrix.harness.execution import workspace_files
from crashmatrix.harness.execution.workspace_files import snapshot


def test_links_are_recorded_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET")
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "a.txt").write_text("a\n")
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    (ws / "door").symlink_to(outside)
    files = snapshot(ws)
    assert files == {
        "door": f"symlink -> {outside}",
        "leak.txt": f"symlink -> {outside / 'secret.txt'}",
        "sub/a.txt": "a\n",
    }
    assert "TOP SECRET" not in "".join(files.values())


def test_a_fifo_is_named_not_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    assert snapshot(tmp_path) == {"pipe": "<fifo: not read>"}


def test_a_huge_file_is_shown_by_its_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace_files, "MAX_FILE_BYTES", 10)
    (tmp_path / "big").write_bytes(b"x" * 11)
    (tmp_path / "small").write_bytes(b"x" * 10)
    assert snapshot(tmp_path) == {"big": "<11 bytes: larger than 10, not read>", "small": "x" * 10}


def test_a_missing_workspace_is_empty(tmp_path: Path) -> None:
    assert snapshot(tmp_path / "nothing") == {}
