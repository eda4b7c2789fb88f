"""Paths in printed repro commands: relative to the repository root, else to the current directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.cli.portable import (
    found_from_here,
    is_portable,
    portable_path,
    portable_paths,
    repository_root,
    run_dir,
)
from crashmatrix.harness.evaluate import repro_command


def _repo(root: Path, marker_is_file: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if marker_is_file:  # a worktree's or submodule's `.git` is a file naming the real one
        (root / ".git").write_text("gitdir: /elsewhere\n")
    else:
        (root / ".git").mkdir()
    return root


def test_a_directory_inside_a_repository_is_named_from_its_root(tmp_path: Path) -> None:
    root = _repo(tmp_path / "repo")
    (root / "sub" / "deeper").mkdir(parents=True)
    assert portable_path("scen", root / "sub") == "sub/scen"
    assert portable_path("../scen", root / "sub" / "deeper") == "sub/scen"
    assert portable_path(str(root / "a" / "b")) == "a/b"  # absolute in, relative out
    assert portable_path(".", root) == "."


def test_a_worktree_marker_file_counts_as_a_root(tmp_path: Path) -> None:
    root = _repo(tmp_path / "wt", marker_is_file=True)
    assert repository_root(root / "x" / "y") == root
    assert portable_path(str(root / "x")) == "x"


def test_outside_any_repository_the_current_directory_is_the_root(tmp_path: Path) -> None:
    here = tmp_path / "plain"
    (here / "s").mkdir(parents=True)
    if repository_root(tmp_path) is not None:
        pytest.skip(f"{tmp_path} is inside a repository: no directory outside one to test with")
    assert portable_path(str(here / "s"), here) == "s"
    assert portable_path("s", here) == "s"


def test_a_path_outside_both_is_kept_as_given(tmp_path: Path) -> None:
    here = tmp_path / "a"
    here.mkdir()
    if repository_root(tmp_path) is not None:
        pytest.skip(f"{tmp_path} is inside a repository: no directory outside one to test with")
    elsewhere = str(tmp_path / "b" / "scen")
    assert portable_path(elsewhere, here) == elsewhere


def test_the_repository_the_command_runs_in_names_a_nested_one(tmp_path: Path) -> None:
    outer = _repo(tmp_path / "outer")
    inner = _repo(outer / "vendor" / "inner")
    # Run from the outer checkout: a submodule's folder is named from the outer root, where the
    # reader of the log will stand.
    assert portable_path(str(inner / "s"), outer) == "vendor/inner/s"
    assert portable_path(str(outer / "vendor" / "t"), outer / "vendor") == "vendor/t"
    # Run from inside the submodule's own checkout: named from its root.
    assert portable_path(str(inner / "s"), inner) == "s"
    # Run from outside any repository: the root of the repository holding the path.
    if repository_root(tmp_path) is None:
        assert portable_path(str(inner / "s"), tmp_path) == "s"


def test_a_path_outside_every_root_is_said_not_to_be_portable(tmp_path: Path) -> None:
    assert is_portable("checks/scenarios")
    assert not is_portable(str(tmp_path / "elsewhere"))


def test_an_agent_found_from_a_subdirectory_has_its_repro_line_go_there_first(tmp_path: Path) -> None:
    # `crashmatrix run --agent langgraph:support_lg.broken:build` works only where support_lg
    # imports: the repro line `cd`s there from the root, and names scenario folders from there.
    root = _repo(tmp_path / "repo")
    app = root / "examples" / "support_app"
    (app / "scenarios").mkdir(parents=True)
    assert run_dir(app) == "examples/support_app"
    assert run_dir(root) is None
    assert portable_paths(["scenarios", str(app / "scenarios")], app, from_here=True) == ["scenarios"] * 2
    line = repro_command("refund/35:effect.after:send_email/kill", ["scenarios"],
                         "langgraph:support_lg.broken:build", run_dir="examples/support_app")
    assert line == ("cd examples/support_app && crashmatrix repro refund/35:effect.after:send_email/kill "
                    "--scenarios scenarios --agent langgraph:support_lg.broken:build")


@pytest.mark.parametrize(("agent", "here"), [
    ("langgraph:support_lg.fixed:build", True), ("toyagent.adapter:AGENT", True),
    ("langgraph", False), ("durable-agent", False), ("mutant:rerun-never", False)])
def test_which_agents_are_found_from_the_current_directory(agent: str, here: bool) -> None:
    assert found_from_here(agent) is here


def test_a_folder_outside_the_repository_stays_absolute_when_lines_go_to_a_subdirectory(
        tmp_path: Path) -> None:
    root = _repo(tmp_path / "repo")
    app = root / "app"
    app.mkdir()
    outside = tmp_path / "elsewhere"
    (printed,) = portable_paths([str(outside)], app, from_here=True)
    assert printed == str(outside)
    assert not is_portable(printed)
