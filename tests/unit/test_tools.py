"""Tools: workspace confinement, argument checking, error results instead of crashes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crashmatrix.agent.records import Replay
from crashmatrix.agent.tools import BUILTINS, Registry, invoke


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return tmp_path / "ws"


@pytest.mark.parametrize("path", ["../secret.txt", "/etc/passwd", "sub/../../secret.txt"])
def test_paths_outside_the_workspace_are_refused(ws: Path, path: str) -> None:
    for tool, args in [("read", {"path": path}), ("append_note", {"path": path, "line": "x"}),
                       ("write", {"path": path, "content": "x"})]:
        result = invoke(BUILTINS[tool], ws, args)
        assert result.is_error
        assert "outside the workspace" in result.content
    assert (ws.parent / "secret.txt").read_text() == "outside\n"


def test_symlink_escape_is_refused(ws: Path) -> None:
    (ws / "link").symlink_to(ws.parent)
    result = invoke(BUILTINS["read"], ws, {"path": "link/secret.txt"})
    assert result.is_error
    assert "outside the workspace" in result.content


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "missing required argument 'path'"),
        ({"path": 3}, "argument 'path' must be string"),
        ({"path": "a.txt", "mode": "x"}, "unknown argument 'mode'"),
        (["a.txt"], "arguments must be a JSON object"),
    ],
)
def test_bad_arguments_give_an_error_result(ws: Path, args: object, message: str) -> None:
    result = invoke(BUILTINS["read"], ws, args)
    assert result.is_error
    assert message in result.content


def test_append_note_appends_one_line(ws: Path) -> None:
    invoke(BUILTINS["append_note"], ws, {"path": "notes/c.md", "line": "x\n"})
    invoke(BUILTINS["append_note"], ws, {"path": "notes/c.md", "line": "y"})
    assert (ws / "notes" / "c.md").read_text() == "x\ny\n"


def test_edit_requires_exactly_one_match(ws: Path) -> None:
    assert invoke(BUILTINS["edit"], ws, {"path": "a.txt", "old": "zzz", "new": "q"}).is_error
    assert not invoke(BUILTINS["edit"], ws, {"path": "a.txt", "old": "hello", "new": "bye"}).is_error
    assert (ws / "a.txt").read_text() == "bye\n"


def test_bash_reports_exit_code_and_runs_in_workspace(ws: Path) -> None:
    ok = invoke(BUILTINS["bash"], ws, {"command": "cat a.txt"})
    assert ok.content.startswith("exit code 0\nhello")
    assert not ok.is_error
    bad = invoke(BUILTINS["bash"], ws, {"command": "exit 3"})
    assert bad.is_error
    assert bad.content.startswith("exit code 3")


def test_stop_run_asks_to_terminate(ws: Path) -> None:
    assert invoke(BUILTINS["stop_run"], ws, {"reason": "done"}).terminate


def test_registry_policy_override_and_unknown_tool() -> None:
    reg = Registry.build(["read"], {"read": Replay.NEVER})
    assert reg.tools["read"].replay is Replay.NEVER
    assert list(reg.tools) == ["read"]
    with pytest.raises(ValueError, match="unknown tool"):
        Registry.build(["rm"])


def test_a_nul_byte_in_a_path_is_an_error_result_not_an_exception(ws: Path) -> None:
    # Before: ValueError escaped the tool; `read` is safe, so every recovery re-ran it and died.
    for tool, args in [("read", {"path": "a\x00b"}), ("append_note", {"path": "a\x00b", "line": "x"}),
                       ("write", {"path": "a\x00b", "content": "x"}), ("edit", {"path": "a\x00", "old": "a",
                                                                                "new": "b"})]:
        result = invoke(BUILTINS[tool], ws, args)
        assert result.is_error
        assert "NUL byte" in result.content


def test_a_fifo_is_refused_instead_of_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    for tool, args in [("read", {"path": "pipe"}), ("append_note", {"path": "pipe", "line": "x"})]:
        result = invoke(BUILTINS[tool], ws, args)
        assert result.is_error
        assert "not a regular file" in result.content


def test_append_note_appends_exactly_one_line(ws: Path) -> None:
    result = invoke(BUILTINS["append_note"], ws, {"path": "a.txt", "line": "one\ntwo"})
    assert result.is_error
    assert "single line" in result.content
    assert (ws / "a.txt").read_text() == "hello\n"
    assert not invoke(BUILTINS["append_note"], ws, {"path": "a.txt", "line": "three\n"}).is_error
    assert (ws / "a.txt").read_text() == "hello\nthree\n"
