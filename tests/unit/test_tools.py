"""Tools: workspace confinement, argument checking, error results instead of crashes."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from crashmatrix.agent import tools
from crashmatrix.agent.records import Replay
from crashmatrix.agent.tools import BUILTINS, BashEnv, Registry, ToolSettings, invoke


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


def _gone(pid: int, within: float = 1.0) -> bool:
    """Whether `pid` has ended within `within` seconds (a zombie nobody reaped yet counts as ended)."""
    end = time.monotonic() + within
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.02)


def _kill_leftover(pidfile: Path) -> None:
    """So that a failing run leaves no sleeper behind."""
    if pidfile.exists():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_bash_timeout_kills_the_commands_children_too(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: only /bin/sh was killed; the sleep it was waiting for ran on under init.
    # 2 s: two shell start-ups must write the pid first, even on a loaded machine.
    monkeypatch.setattr(tools, "BASH_TIMEOUT_S", 2.0)
    try:
        result = invoke(BUILTINS["bash"], ws, {"command": "sh -c 'echo $$ > pid; exec sleep 30'; echo done"})
        assert result.is_error
        assert "timed out after 2s" in result.content
        assert _gone(int((ws / "pid").read_text()))
    finally:
        _kill_leftover(ws / "pid")


def test_bash_returns_when_the_shell_exits_and_kills_what_it_left_running(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the background sleep held the output pipe open, so a success became a timeout.
    monkeypatch.setattr(tools, "BASH_TIMEOUT_S", 20.0)
    try:
        started = time.monotonic()
        result = invoke(BUILTINS["bash"], ws, {"command": "sleep 30 & echo $! > pid; echo started"})
        assert time.monotonic() - started < 10.0  # well before the timeout
        assert result.content == "exit code 0\nstarted\n"
        assert not result.is_error
        assert _gone(int((ws / "pid").read_text()))
    finally:
        _kill_leftover(ws / "pid")


def test_bash_output_is_capped_per_stream_with_a_marker(ws: Path) -> None:
    # Before: every byte went into the result (and the session log); 80 MB made one commit.
    cap, size = tools.BASH_OUTPUT_CAP_BYTES, 3 * 1024 * 1024
    command = f"head -c {size} /dev/zero | tr '\\0' o; head -c {size} /dev/zero | tr '\\0' e >&2"
    result = invoke(BUILTINS["bash"], ws, {"command": command})
    assert len(result.content) < 2 * cap + 300
    assert result.content.startswith("exit code 0\n" + "o" * cap + "\n[stdout truncated: ")
    assert f"[stdout truncated: {size - cap} more bytes dropped (cap {cap} bytes)]" in result.content
    assert "\n[stderr]\n" + "e" * cap + f"\n[stderr truncated: {size - cap} more bytes" in result.content


def test_read_of_a_large_file_is_truncated_with_a_marker(ws: Path) -> None:
    # Before: the whole file was read into memory and into the result.
    cap = tools.READ_CAP_BYTES
    chars, kept = cap // 3 + 1000, cap // 3  # "€" is 3 bytes, and the cap cuts one in half
    (ws / "big.txt").write_text("€" * chars, encoding="utf-8")
    result = invoke(BUILTINS["read"], ws, {"path": "big.txt"})
    assert not result.is_error
    marker = f"\n[big.txt truncated: {(chars - kept) * 3} more bytes dropped (cap {cap} bytes)]\n"
    assert result.content == "€" * kept + marker
    assert invoke(BUILTINS["read"], ws, {"path": "a.txt"}).content == "hello\n"


@pytest.mark.parametrize(("bash_env", "leaks"), [(BashEnv.INHERIT, True), (BashEnv.CLEAN, False)])
def test_a_clean_bash_environment_holds_no_secrets(
    ws: Path, monkeypatch: pytest.MonkeyPatch, bash_env: BashEnv, leaks: bool
) -> None:
    # Before: bash always saw the agent's whole environment, and `env` printed the API key.
    monkeypatch.setenv("OPENAI_API_KEY", "secret-xyz")
    registry = Registry.build(["bash"], settings=ToolSettings(bash_env=bash_env))
    result = invoke(registry.tools["bash"], ws, {"command": "env"})
    assert ("secret-xyz" in result.content) is leaks
    if not leaks:
        names = {line.partition("=")[0] for line in result.content.splitlines()[1:] if "=" in line}
        assert names - {"PWD", "OLDPWD", "SHLVL", "_"} == {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL"}
        assert f"HOME={ws.resolve()}" in result.content.splitlines()


def test_bash_inherits_the_environment_unless_asked_otherwise() -> None:
    assert Registry.build(["bash"]).tools["bash"].settings.bash_env is BashEnv.INHERIT
    assert BUILTINS["bash"].settings == ToolSettings()
