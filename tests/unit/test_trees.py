"""Trees an agent made, any depth deep: walked and removed without recursion (issue 33, L1)."""

from __future__ import annotations

import os
from pathlib import Path

from crashmatrix.harness.execution.trees import any_nonempty_file, remove_tree, walk

DEPTH = 3000  # past Python's recursion limit (1000) and, as a path, past PATH_MAX (4096)


def _deep(root: Path, depth: int = DEPTH) -> None:
    """`root/d/d/.../d/f` with `depth` directories, made by descriptors (the path is too long)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with os.fdopen(os.open("f", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write("x")
    finally:
        os.close(fd)


def test_a_tree_thousands_of_levels_deep_is_removed(tmp_path: Path) -> None:
    _deep(tmp_path / "t")
    (tmp_path / "t" / "top.txt").write_text("y")
    (tmp_path / "t" / "link").symlink_to(tmp_path / "keep")  # removed, never followed
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "k.txt").write_text("k")
    remove_tree(tmp_path / "t")
    assert not (tmp_path / "t").exists(), "left for pytest's clean-up, which would recurse"
    assert (tmp_path / "keep" / "k.txt").read_text() == "k"


def test_walking_a_deep_tree_does_not_recurse(tmp_path: Path) -> None:
    _deep(tmp_path / "t", depth=1500)  # a path of ~3000 characters: listable, past recursion
    try:
        seen = list(walk(tmp_path / "t"))
        assert len(seen) == 1501
        assert seen[-1][2] == ["f"]
        assert any_nonempty_file(tmp_path / "t")
    finally:
        remove_tree(tmp_path / "t")  # pytest's own clean-up of tmp_path recurses: never leave it one


def test_a_directory_it_cannot_enter_is_made_enterable(tmp_path: Path) -> None:
    locked = tmp_path / "t" / "locked"
    locked.mkdir(parents=True)
    (locked / "secret").write_text("s")
    locked.chmod(0)
    remove_tree(tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_removing_what_is_not_there_or_a_file_is_quiet(tmp_path: Path) -> None:
    remove_tree(tmp_path / "absent")
    (tmp_path / "file").write_text("z")
    remove_tree(tmp_path / "file")
    assert not (tmp_path / "file").exists()
