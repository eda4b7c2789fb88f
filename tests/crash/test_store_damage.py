"""A damaged session store is refused with exit 3 and a message naming the file, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.agent_env import Paths, make_paths, run_cli
from tests.support.stub_provider import StubProvider, answer

EXIT_SESSION = 3


def _session_jsonl_is_a_directory(paths: Paths) -> str:
    (paths.session / "session.jsonl").mkdir(parents=True)
    return "session.jsonl"


def _session_lock_is_a_directory(paths: Paths) -> str:
    (paths.session / "session.lock").mkdir(parents=True)
    return "session.lock"


def _session_path_is_a_file(paths: Paths) -> str:
    paths.session.write_text("not a directory")
    return str(paths.session)


def _config_is_an_array(paths: Paths) -> str:
    paths.session.mkdir()
    (paths.session / "config.json").write_text("[]")
    return "config.json: expected a JSON object, found list"


def _config_field_is_a_number(paths: Paths) -> str:
    paths.session.mkdir()
    (paths.session / "config.json").write_text(json.dumps({"workspace": 7}))
    return "field 'workspace' must be a string"


def _config_is_not_json(paths: Paths) -> str:
    paths.session.mkdir()
    (paths.session / "config.json").write_text("{")
    return "config.json: not valid JSON"


@pytest.mark.parametrize("command", ["run", "recover"])
@pytest.mark.parametrize("damage", [
    _session_jsonl_is_a_directory, _session_lock_is_a_directory, _session_path_is_a_file,
    _config_is_an_array, _config_field_is_a_number, _config_is_not_json,
])
def test_store_damage_exits_3_naming_the_file(
        tmp_path: Path, damage: Callable[[Paths], str], command: str) -> None:
    paths = make_paths(tmp_path)
    named = damage(paths)
    with StubProvider(lambda messages: answer("done")) as stub:
        extra = ("run", "task") if command == "run" else ("recover",)
        proc = run_cli(paths, stub.url, *extra)
    assert proc.returncode == EXIT_SESSION, proc.stderr
    assert "Traceback" not in proc.stderr
    assert named in proc.stderr
    assert not stub.requests  # refused before anything was asked or run


def test_show_of_a_missing_session_is_an_error_not_an_empty_session(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    proc = run_cli(paths, None, "show")
    assert proc.returncode == EXIT_SESSION
    assert f"no session at {paths.session}" in proc.stderr
    assert not paths.session.exists()  # show creates nothing


def test_show_of_a_damaged_log_exits_3(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    (paths.session / "session.jsonl").mkdir(parents=True)
    proc = run_cli(paths, None, "show")
    assert proc.returncode == EXIT_SESSION
    assert "Traceback" not in proc.stderr
    assert "session.jsonl" in proc.stderr


def test_show_of_a_log_with_a_bad_complete_last_line_exits_3(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(lambda messages: answer("done")) as stub:
        assert run_cli(paths, stub.url, "run", "task").returncode == 0
        log = paths.session / "session.jsonl"
        data = log.read_bytes()
        log.write_bytes(data.replace(b"done", b"DONE"))  # the last commit, damaged after its ack
        proc = run_cli(paths, None, "show")
        assert proc.returncode == EXIT_SESSION
        assert "checksum mismatch" in proc.stderr
        recovered = run_cli(paths, stub.url, "recover")
    assert recovered.returncode == EXIT_SESSION  # refused: never resumed as if unfinished
    assert len(stub.requests) == 1
    assert log.read_bytes() == data.replace(b"done", b"DONE")
