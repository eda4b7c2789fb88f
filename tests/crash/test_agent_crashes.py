"""Real SIGKILLs of `durable-agent` at probe events, then `durable-agent recover`."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.execution.incarnation import Incarnation, IncarnationTimeout
from tests.support.agent_env import AGENT, launch, make_paths, run_cli
from tests.support.killer import run_and_kill, run_to_end
from tests.support.stub_provider import StubProvider, answer, call, changelog_script, results, tool_calls

pytestmark = pytest.mark.crash
LINE = "修复登录超时"


def _tool_results(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("role") == "tool"]


def _assert_paired(entries: list[dict[str, Any]]) -> None:
    """Every call has exactly one result, in the window after its assistant message."""
    messages = [e for e in entries if e["type"] == "message"]
    for i, m in enumerate(messages):
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        window = []
        for later in messages[i + 1:]:
            if later["role"] != "tool":
                break
            window.append(later["tool_call_id"])
        assert sorted(window) == sorted(c["id"] for c in m["tool_calls"]), m["id"]


def test_kill_after_append_then_recover_tells_the_model_the_outcome_is_unknown(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub:
        run_and_kill(paths, stub.url, "run", "append and test", at="effect.after:append_note")
        assert (paths.workspace / "CHANGELOG.md").read_text().count(LINE) == 1
        before = len(stub.requests)
        proc = run_cli(paths, stub.url, "recover")
        assert proc.returncode == 0, proc.stderr
        first_after = stub.requests[before]
    text = (paths.workspace / "CHANGELOG.md").read_text()
    assert text.count(LINE) == 1, text
    entries = paths.entries()
    unknown = [r for r in _tool_results(entries) if r.get("recovered") == "unknown"]
    assert [(r["tool_call_id"], r["is_error"]) for r in unknown] == [("call_1", True)]
    # The model is told so in the next request.
    assert first_after[-1]["role"] == "tool"
    assert first_after[-1]["tool_call_id"] == "call_1"
    assert "outcome is unknown" in first_after[-1]["content"]
    assert entries[-1] == {"type": "run_finished", "run_id": entries[-1]["run_id"], "outcome": "completed"}
    _assert_paired(entries)


def _read_then_answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    if "call_1" not in results(messages):
        return tool_calls(call("call_1", "read", path="CHANGELOG.md"))
    return answer("read it")


def test_kill_after_a_safe_read_reruns_it_under_the_original_call_id(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(_read_then_answer) as stub:
        run_and_kill(paths, stub.url, "run", "read", at="effect.after:read")
        proc = run_cli(paths, stub.url, "recover")
        assert proc.returncode == 0, proc.stderr
        assert stub.requests[-1][-1] == {"role": "tool", "tool_call_id": "call_1",
                                         "content": "# Changelog\n"}
    (result,) = _tool_results(paths.entries())
    assert (result["tool_call_id"], result["recovered"]) == ("call_1", "rerun")


def test_after_run_finished_recover_makes_no_request_and_runs_no_tool(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub:
        assert run_cli(paths, stub.url, "run", "t").returncode == 0
        requests, log = len(stub.requests), (paths.session / "session.jsonl").read_bytes()
        code, events = run_to_end(paths, stub.url, "recover")
        assert code == 0
        assert len(stub.requests) == requests
    assert [e.point for e in events] == ["recovery.branch:nothing.no_open_run", "inbox.poll:inbox"] or \
        [e.point for e in events] == ["recovery.branch:nothing.no_open_run"]
    assert not [e for e in events if e.kind.startswith(("effect", "provider", "commit"))]
    assert (paths.session / "session.jsonl").read_bytes() == log
    assert (paths.workspace / "CHANGELOG.md").read_text().count(LINE) == 1


def test_a_crash_at_every_commit_of_recovery_is_itself_recoverable(tmp_path: Path) -> None:
    # Learn the recovery incarnation's events once, then crash at each commit boundary of it.
    probe_dir = make_paths(tmp_path / "probe")
    with StubProvider(changelog_script) as stub:
        run_and_kill(probe_dir, stub.url, "run", "t", at="effect.after:append_note")
        _, events = run_to_end(probe_dir, stub.url, "recover")
        commit_points = [e.n for e in events if e.kind.startswith("commit.")]
        assert len(commit_points) >= 9
        for n in commit_points:
            paths = make_paths(tmp_path / f"case{n}")
            run_and_kill(paths, stub.url, "run", "t", at="effect.after:append_note")
            run_and_kill(paths, stub.url, "recover", at=n)
            proc = run_cli(paths, stub.url, "recover")
            assert proc.returncode == 0, (n, proc.stderr)
            assert (paths.workspace / "CHANGELOG.md").read_text().count(LINE) == 1, n
            entries = paths.entries()
            assert entries[-1]["type"] == "run_finished"
            assert entries[-1]["outcome"] == "completed", n
            _assert_paired(entries)
            assert len(_tool_results(entries)) == len({(r["id"]) for r in _tool_results(entries)})


def test_damaged_middle_line_refuses_to_open_and_names_the_line(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub:
        assert run_cli(paths, stub.url, "run", "t").returncode == 0
    log = paths.session / "session.jsonl"
    lines = log.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"append_note", b"append_nope")
    log.write_bytes(b"\n".join(lines))
    damaged = log.read_bytes()
    proc = run_cli(paths, None, "recover")
    assert proc.returncode == 3
    assert "line 3: checksum mismatch" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert log.read_bytes() == damaged


def test_torn_tail_is_repaired_and_reported(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub:
        run_and_kill(paths, stub.url, "run", "t", at="effect.after:bash")
        log = paths.session / "session.jsonl"
        log.write_bytes(log.read_bytes() + b'{"seq":99,"entries":[{"ty')
        code, events = run_to_end(paths, stub.url, "recover")
        assert code == 0
    assert "recovery.branch:open.torn_tail_repaired" in [e.point for e in events]
    assert paths.entries()[-1]["outcome"] == "completed"


def test_second_process_gets_a_lock_error_naming_the_holder(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub, Incarnation(launch(paths, stub.url, "run", "t")) as holder:
        event = holder.next_event(time.monotonic() + 30)  # holds the lock, blocked at a probe
        assert event is not None
        proc = run_cli(paths, stub.url, "recover")
        assert proc.returncode == 3
        assert f"locked by pid {holder.pid}" in proc.stderr
        holder.kill()
    assert json.loads((paths.session / "config.json").read_text())["workspace"] == str(paths.workspace)


def test_permits_granted_ahead_stop_the_agent_exactly_at_the_first_event_without_one(
        tmp_path: Path) -> None:
    """The harness writes N-1 permits at once; the agent runs through them and blocks at N."""
    with StubProvider(changelog_script) as stub:
        _, recorded = run_to_end(make_paths(tmp_path / "recording"), stub.url, "run", "append and test")
        target = next(e.n for e in recorded if e.point == "effect.before:append_note")
        paths = make_paths(tmp_path / "case")
        deadline = time.monotonic() + 30
        with Incarnation(launch(paths, stub.url, "run", "append and test")) as inc:
            inc.permit_through(target - 1)  # before reading a single event
            seen = []
            while len(seen) < target:
                event = inc.next_event(deadline)
                assert event is not None, [e.point for e in seen]
                seen.append(event)
            assert [e.point for e in seen] == [e.point for e in recorded[:target]]
            # Blocked at `target`: no next event, the process alive, the append not done.
            with pytest.raises(IncarnationTimeout):
                inc.next_event(time.monotonic() + 0.5)
            assert inc.proc.poll() is None
            inc.kill()
        changelog = paths.workspace / "CHANGELOG.md"
        assert LINE not in (changelog.read_text() if changelog.exists() else "")


def test_a_refused_run_on_a_locked_session_changes_no_setting(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub, Incarnation(launch(paths, stub.url, "run", "t")) as holder:
        assert holder.next_event(time.monotonic() + 30) is not None  # the holder has the lock
        saved = (paths.session / "config.json").read_text()
        elsewhere = tmp_path / "hijack"
        elsewhere.mkdir()
        proc = subprocess.run([*AGENT, "--session", str(paths.session), "--workspace", str(elsewhere),
                               "--provider-url", "http://127.0.0.1:9/v1", "run", "other task"],
                              capture_output=True, text=True, timeout=60, check=False)
        assert proc.returncode == 3, proc.stderr
        assert (paths.session / "config.json").read_text() == saved
        holder.kill()
