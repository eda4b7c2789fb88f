"""The loop's commit order observed through probes, the retry path, and recovery in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crashmatrix.agent import inbox
from crashmatrix.agent import records as R
from crashmatrix.agent.log import SessionLog
from crashmatrix.agent.loop import to_wire
from crashmatrix.agent.records import Intent, Outcome, Replay, Role
from tests.support.agent_env import make_agent, make_paths, recording
from tests.support.stub_provider import (
    StubProvider,
    answer,
    call,
    changelog_script,
    results,
    tool_calls,
)


def test_commit_order_of_a_clean_run(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub, recording() as rec, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("append and test") == "completed"
    points = [p for p in rec.points() if not p.startswith(("commit.before", "commit.written"))]
    assert points == [
        "recovery.branch:nothing.no_open_run",
        "commit.after:run_started.prompt,message.user",
        "inbox.poll:inbox",
        "provider.before:chat",
        "provider.after:reply",
        "commit.after:message.assistant",
        "commit.after:tool_started.append_note",
        "effect.before:append_note",
        "effect.after:append_note",
        "commit.after:message.tool.append_note",
        "inbox.poll:inbox",
        "provider.before:chat",
        "provider.after:reply",
        "commit.after:message.assistant",
        "commit.after:tool_started.bash",
        "effect.before:bash",
        "effect.after:bash",
        "commit.after:message.tool.bash",
        "inbox.poll:inbox",
        "provider.before:chat",
        "provider.after:reply",
        "commit.after:message.assistant,run_finished.completed",
    ]
    # Every commit has before/written/after, in that order.
    commits = [p for p in rec.points() if p.startswith("commit.")]
    assert len(commits) % 3 == 0
    for i in range(0, len(commits), 3):
        kinds = [c.split(":")[0] for c in commits[i:i + 3]]
        assert kinds == ["commit.before", "commit.written", "commit.after"]
    assert (paths.workspace / "CHANGELOG.md").read_text().count("修复登录超时") == 1


def test_tool_started_carries_effective_args_policy_and_reserved_id(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub, make_agent(paths, stub.url) as agent:
        agent.run_prompt("t")
    entries = paths.entries()
    started = next(e for e in entries if e["type"] == "tool_started")
    assert started["args"] == {"path": "CHANGELOG.md", "line": "修复登录超时"}
    assert started["replay"] == "never"
    result = next(e for e in entries if e.get("tool_call_id") == started["call_id"])
    assert result["id"] == started["result_id"]


def test_retry_pending_is_committed_before_the_wait(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    served: list[int] = []

    def flaky(messages: list[dict[str, Any]]) -> dict[str, Any] | int:
        served.append(1)
        return 500 if len(served) == 1 else answer("fine")

    log_len_at_sleep: list[int] = []
    with StubProvider(flaky) as stub:
        agent = make_agent(paths, stub.url)
        with agent:
            agent.sleep = lambda s: log_len_at_sleep.append(len(agent.log.commits))
            assert agent.run_prompt("t") == "completed"
    kinds = [[e["type"] for e in c] for c in paths.commits()]
    assert kinds[1] == ["retry_pending"]
    assert log_len_at_sleep == [2], "the wait starts only after retry_pending is durable"
    assert len(served) == 2


def test_retries_are_bounded_then_the_run_fails(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(lambda m: 503) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "failed"
        assert len(stub.requests) == 4  # first try + max_retries (3)
    finished = paths.entries()[-1]
    assert finished["outcome"] == "failed"
    assert "HTTP 503" in finished["reason"]


def test_non_retryable_error_fails_without_retry(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(lambda m: 400) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "failed"
        assert len(stub.requests) == 1


def test_path_outside_workspace_is_an_error_result_and_the_run_goes_on(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        done = results(messages)
        if "c1" not in done:
            return tool_calls(call("c1", "read", path="../../etc/passwd"))
        if "c2" not in done:
            return tool_calls(call("c2", "read", path="CHANGELOG.md"), call("c3", "nope"))
        return answer("ok")

    with StubProvider(script) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "completed"
    tool_msgs = {e["tool_call_id"]: e for e in paths.entries() if e.get("role") == "tool"}
    assert tool_msgs["c1"]["is_error"]
    assert "outside the workspace" in tool_msgs["c1"]["content"]
    assert tool_msgs["c2"]["content"] == "# Changelog\n"
    assert "unknown tool" in tool_msgs["c3"]["content"]


def test_bad_json_arguments_are_an_error_result(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if not results(messages):
            bad = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{nope"}}
            return tool_calls(bad)
        return answer("ok")

    with StubProvider(script) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "completed"
    (result,) = [e for e in paths.entries() if e.get("role") == "tool"]
    assert result["is_error"]
    assert "not valid JSON" in result["content"]


def _interrupted_log(paths: Any, tool: str, replay: Replay, args: dict[str, Any]) -> None:
    """A log as a crash right after the effect leaves it: a call with tool_started, no result."""
    paths.session.mkdir(parents=True)
    log = SessionLog(paths.session / "session.jsonl", fsync=False)
    log.open()
    log.commit([R.run_started("run-1", Intent.PROMPT), R.message("m1.0", "run-1", Role.USER, "task")])
    log.commit([R.message("m2.0", "run-1", Role.ASSISTANT, None, tool_calls=[call("call_1", tool, **args)])])
    log.commit([R.tool_started("run-1", "m2.0", "call_1", tool, args, "m4.0", replay)])
    log.close()


def test_recovery_commits_repair_close_and_continuation_in_one_commit(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    _interrupted_log(paths, "append_note", Replay.NEVER, {"path": "CHANGELOG.md", "line": "x"})
    with StubProvider(lambda m: answer("ok")) as stub, make_agent(paths, stub.url) as agent:
        assert agent.recover() == "completed"
        (request,) = stub.requests
    commits = paths.commits()
    recovery = commits[3]
    assert [e["type"] for e in recovery] == ["message", "run_finished", "run_started"]
    repair, closed, resumed = recovery
    assert repair["id"] == "m4.0", "the synthetic result uses the reserved result id"
    assert (repair["is_error"], repair["recovered"]) == (True, "unknown")
    assert "outcome is unknown" in repair["content"]
    assert (closed["outcome"], closed["reason"]) == ("aborted", "interrupted")
    assert (resumed["intent"], resumed["resumed_from"], resumed["resume_attempt"]) == ("resume", "run-1", 1)
    # The continuation's request carries the committed history exactly: no re-sent task.
    messages = [e for e in paths.entries() if e["type"] == "message"]
    assert request[1:] == [to_wire(m) for m in messages[:3]]
    assert [m["content"] for m in request if m["role"] == "user"] == ["task"]
    assert (paths.workspace / "CHANGELOG.md").read_text() == "# Changelog\n", "never re-run"


def test_recovery_reruns_a_safe_read_under_the_original_call_id(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    _interrupted_log(paths, "read", Replay.SAFE, {"path": "CHANGELOG.md"})
    with StubProvider(lambda m: answer("ok")) as stub, make_agent(paths, stub.url) as agent:
        agent.recover()
        assert stub.requests[0][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "# Changelog\n"}
    repair = paths.commits()[3][0]
    assert (repair["tool_call_id"], repair["recovered"], repair["id"]) == ("call_1", "rerun", "m4.0")


def test_policy_now_never_is_not_rerun(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    _interrupted_log(paths, "read", Replay.SAFE, {"path": "CHANGELOG.md"})
    with StubProvider(lambda m: answer("ok")) as stub, \
            make_agent(paths, stub.url, policies={"read": Replay.NEVER}) as agent:
        agent.recover()
    assert paths.commits()[3][0]["recovered"] == "unknown"


def test_finished_run_recover_makes_no_request(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub:
        with make_agent(paths, stub.url) as agent:
            agent.run_prompt("t")
        before = len(stub.requests)
        commits_before = len(paths.commits())
        with make_agent(paths, stub.url) as agent:
            assert agent.recover() is None
        assert len(stub.requests) == before
    assert len(paths.commits()) == commits_before


def test_budget_exhausted_closes_with_a_visible_notice(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    paths.session.mkdir(parents=True)
    log = SessionLog(paths.session / "session.jsonl", fsync=False)
    log.open()
    log.commit([R.run_started("run-1", Intent.PROMPT), R.message("m1.0", "run-1", Role.USER, "task")])
    log.commit([R.run_finished("run-1", Outcome.ABORTED, "interrupted"),
                R.run_started("run-2", Intent.RESUME, "run-1", 1)])
    log.close()
    with StubProvider(lambda m: answer("ok")) as stub, make_agent(paths, stub.url, budget=1) as agent:
        assert agent.recover() == "aborted"
        assert stub.requests == []
        assert agent.notices_since_start()
        assert "resume budget (1)" in agent.notices_since_start()[0]
    last = paths.commits()[-1]
    assert [e["type"] for e in last] == ["notice", "run_finished"]


def test_queued_input_becomes_a_user_message_before_the_next_request(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if not results(messages):
            inbox.deliver(paths.session / "inbox", inbox.InboxKind.INPUT, "also this", "in-1")
            return tool_calls(call("c1", "read", path="CHANGELOG.md"))
        return answer("ok")

    with StubProvider(script) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "completed"
        assert stub.requests[-1][-1] == {"role": "user", "content": "also this"}
    types = [[e["type"] for e in c] for c in paths.commits()]
    assert ["input_queued"] in types
    assert ["message", "input_consumed"] in types
    assert not list((paths.session / "inbox").glob("*.json"))


def test_cancel_closes_the_run_and_it_is_never_resumed(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        inbox.deliver(paths.session / "inbox", inbox.InboxKind.CANCEL, item_id="k1")
        return tool_calls(call(f"c{len(messages)}", "read", path="CHANGELOG.md"))

    with StubProvider(script) as stub:
        with make_agent(paths, stub.url) as agent:
            assert agent.run_prompt("t") == "cancelled"
        n = len(stub.requests)
        with make_agent(paths, stub.url) as agent:
            assert agent.recover() is None
        assert len(stub.requests) == n
    assert paths.entries()[-1]["outcome"] == "cancelled"
