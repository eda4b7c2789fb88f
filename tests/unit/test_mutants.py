"""Each mutant's patch changes the agent's behaviour as its catalogue entry says, in-process."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.agent import cli, downstream_call, inbox, log, loop, provider, recovery, state
from crashmatrix.agent import records as R
from crashmatrix.agent.lock import SessionLock
from crashmatrix.agent.log import SessionLog
from crashmatrix.agent.loop import Agent
from crashmatrix.agent.records import Entry, Intent, Outcome, Replay, Role
from crashmatrix.agent.recovery import Action
from crashmatrix.agent.state import fold
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName, applied, get
from tests.support.agent_env import Paths, make_agent, make_paths, write_log
from tests.support.stub_provider import StubProvider, answer, call, changelog_script, tool_calls

N = MutantName
LINE = "x"
APPEND = {"path": "CHANGELOG.md", "line": LINE}
Script = Callable[[list[dict[str, Any]]], dict[str, Any]]


@contextmanager
def mutant(name: MutantName | None) -> Iterator[None]:
    """The mutant's patch in this process; None is the correct agent."""
    with applied(CATALOGUE[name]) if name is not None else nullcontext():
        yield


def _prompt(task: str = "task") -> list[Entry]:
    return [R.run_started("run-1", Intent.PROMPT), R.message("m1.0", "run-1", Role.USER, task)]


def _interrupted(paths: Paths, tool: str = "append_note", replay: Replay | None = Replay.NEVER,
                 args: dict[str, str] | None = None) -> None:
    """A crash between the effect and its result: tool_started (unless replay is None), no result."""
    args = args if args is not None else APPEND
    commits = [_prompt(), [R.message("m2.0", "run-1", Role.ASSISTANT, None,
                                     tool_calls=[call("call_1", tool, **args)])]]
    if replay is not None:
        commits.append([R.tool_started("run-1", "m2.0", "call_1", tool, args, "m4.0", replay)])
    write_log(paths, *commits)


def _recover(paths: Paths, name: MutantName | None, script: Script | None = None,
             **agent_kw: Any) -> list[list[dict[str, Any]]]:
    """Run `recover` once under the mutant; returns the requests the provider saw."""
    with mutant(name), StubProvider(script or (lambda m: answer("ok"))) as stub, \
            make_agent(paths, stub.url, **agent_kw) as agent:
        agent.recover()
        return stub.requests


def _changelog(paths: Paths) -> str:
    return (paths.workspace / "CHANGELOG.md").read_text()


def _repair(paths: Paths) -> Entry:
    return next(e for e in paths.entries() if e.get("role") == "tool")


def _types(paths: Paths) -> list[list[str]]:
    return [[e["type"] for e in c] for c in paths.commits()]


# -- the catalogue and its patches ---------------------------------------------------------------
def test_the_catalogue_names_every_mutant_of_the_issue_with_a_failure_class_and_killers() -> None:
    from crashmatrix.scenarios import load_builtin  # noqa: PLC0415 - only this test reads scenarios
    from crashmatrix.scenarios.arrivals import named  # noqa: PLC0415

    builtins = load_builtin()
    assert list(CATALOGUE) == list(MutantName)
    assert len(CATALOGUE) >= 15
    for m in CATALOGUE.values():
        assert m.failure.endswith("."), m.name
        assert ". " not in m.failure, f"{m.name}: one sentence"
        assert m.scenarios, m.name
        # A built-in, or an arrival variant of one (rebuilt from its name).
        assert all(s in builtins or named(s, builtins) for s in m.scenarios), m.name


def _seams() -> dict[tuple[str, str], object]:
    owners: list[Any] = [loop, log, recovery, state, R, inbox, provider, Agent, provider.ProviderClient,
                         SessionLog, cli, downstream_call]
    return {(repr(o), k): v for o in owners for k, v in vars(o).items()}


@pytest.mark.parametrize("name", list(MutantName))
def test_a_patch_changes_the_agent_and_undoes_cleanly(name: MutantName) -> None:
    before = _seams()
    with mutant(name):
        assert _seams() != before, "the patch replaced nothing"
    assert _seams() == before


def test_an_unknown_mutant_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="unknown mutant 'nope'; known: rerun-never"):
        get("nope")


# -- re-running calls ----------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "appended"), [(None, False), (N.RERUN_NEVER, True)])
def test_rerun_never_reruns_a_call_recorded_never(tmp_path: Path, name: MutantName | None,
                                                  appended: bool) -> None:
    paths = make_paths(tmp_path)
    _interrupted(paths)
    _recover(paths, name)
    assert (LINE in _changelog(paths)) is appended
    assert _repair(paths)["recovered"] == ("rerun" if appended else "unknown")


@pytest.mark.parametrize(("name", "recorded", "now", "rerun"), [
    (None, Replay.NEVER, Replay.SAFE, False),
    (N.CURRENT_POLICY_ONLY, Replay.NEVER, Replay.SAFE, True),  # the fault
    (N.CURRENT_POLICY_ONLY, Replay.SAFE, Replay.NEVER, False),  # still reads the current policy
])
def test_current_policy_only_ignores_the_recorded_policy(tmp_path: Path, name: MutantName | None,
                                                         recorded: Replay, now: Replay,
                                                         rerun: bool) -> None:
    paths = make_paths(tmp_path)
    _interrupted(paths, replay=recorded)
    _recover(paths, name, policies={"append_note": now})
    assert (LINE in _changelog(paths)) is rerun


@pytest.mark.parametrize(("name", "starts", "rerun"), [(None, 2, False), (N.NO_TOOL_STARTED, 0, True)])
def test_no_tool_started_records_no_start_and_reruns_what_has_none(
        tmp_path: Path, name: MutantName | None, starts: int, rerun: bool) -> None:
    paths = make_paths(tmp_path)
    with mutant(name), StubProvider(changelog_script) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "completed"
    assert sum(e["type"] == "tool_started" for e in paths.entries()) == starts
    other = make_paths(tmp_path / "interrupted")
    _interrupted(other, replay=None)
    _recover(other, name)
    assert (LINE in _changelog(other)) is rerun


def test_messages_only_reruns_what_has_no_result_and_continues_the_same_run(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    _interrupted(paths)
    _recover(paths, N.MESSAGES_ONLY)
    assert LINE in _changelog(paths), "a never call was re-run"
    assert "recovered" not in _repair(paths)
    runs = [e for e in paths.entries() if e["type"] == "run_started"]
    assert [r["run_id"] for r in runs] == ["run-1"], "no resume record: the open run just goes on"
    fresh = make_paths(tmp_path / "fresh")
    with mutant(N.MESSAGES_ONLY), StubProvider(changelog_script) as stub, \
            make_agent(fresh, stub.url) as agent:
        agent.run_prompt("t")
    assert not [e for e in fresh.entries() if e["type"] == "tool_started"]


# -- which runs are resumed ----------------------------------------------------------------------
@pytest.mark.parametrize(("name", "resumed"), [(None, False), (N.RESUME_FINISHED, True)])
def test_resume_finished_resumes_a_completed_run(tmp_path: Path, name: MutantName | None,
                                                 resumed: bool) -> None:
    paths = make_paths(tmp_path)
    write_log(paths, _prompt(), [R.message("m2.0", "run-1", Role.ASSISTANT, "done"),
                            R.run_finished("run-1", Outcome.COMPLETED)])
    requests = _recover(paths, name)
    assert bool(requests) is resumed
    resumes = [e for e in paths.entries() if e["type"] == "run_started" and e["intent"] == "resume"]
    assert [r["resumed_from"] for r in resumes] == (["run-1"] if resumed else [])
    assert sum(e["type"] == "run_finished" and e["run_id"] == "run-1" for e in paths.entries()) == 1


@pytest.mark.parametrize(("name", "outcome"), [(None, "stopped"), (N.RESUME_FINISHED, "completed")])
def test_resume_finished_continues_a_run_a_tool_asked_to_stop(tmp_path: Path, name: MutantName | None,
                                                             outcome: str) -> None:
    paths = make_paths(tmp_path)
    stop = call("call_1", "stop_run", reason="enough")
    write_log(paths, _prompt(), [R.message("m2.0", "run-1", Role.ASSISTANT, None, tool_calls=[stop])],
         [R.message("m3.0", "run-1", Role.TOOL, "stopping", tool_call_id="call_1",
                    tool_name="stop_run", terminate=True)])
    _recover(paths, name)
    assert paths.entries()[-1]["outcome"] == outcome


@pytest.mark.parametrize(("name", "outcome"), [(None, "aborted"), (N.VOLATILE_RESUME_COUNT, "completed")])
def test_volatile_resume_count_forgets_earlier_resumes(tmp_path: Path, name: MutantName | None,
                                                       outcome: str) -> None:
    paths = make_paths(tmp_path)
    write_log(paths, _prompt(), [R.run_finished("run-1", Outcome.ABORTED, "interrupted"),
                            R.run_started("run-2", Intent.RESUME, "run-1", 1)])
    _recover(paths, name, budget=1)
    assert paths.entries()[-1]["outcome"] == outcome
    attempts = [e.get("resume_attempt") for e in paths.entries() if e["type"] == "run_started"]
    assert attempts == ([None, 1] if name is None else [None, 1, 1])


def test_volatile_resume_count_plans_as_if_no_resume_happened() -> None:
    entries = [*_prompt(), R.run_finished("run-1", Outcome.ABORTED, "interrupted"),
               R.run_started("run-2", Intent.RESUME, "run-1", 3)]
    with mutant(N.VOLATILE_RESUME_COUNT):
        # The loop's own binding of `plan` is the seam the mutant replaces.
        decided = vars(loop)["plan"](fold(entries), {}, budget=3)
    assert (decided.action, decided.resume_attempt) == (Action.CONTINUE, 1)
    assert recovery.plan(fold(entries), {}, budget=3).action is Action.CLOSE_BUDGET


# -- what recovery commits -----------------------------------------------------------------------
@pytest.mark.parametrize("name", [None, N.SPLIT_RECOVERY_COMMIT])
def test_split_recovery_commit_closes_first_and_repairs_later(tmp_path: Path,
                                                             name: MutantName | None) -> None:
    paths = make_paths(tmp_path)
    _interrupted(paths)
    _recover(paths, name)
    after = _types(paths)[3:5]
    if name is None:
        assert after[0] == ["message", "run_finished", "run_started"]
    else:
        assert after == [["run_finished", "run_started"], ["message"]]
        assert _repair(paths)["run_id"] == "run-1", "the repair lands on the run just closed"


def _stop_script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return tool_calls(call("call_1", "stop_run", reason="enough"))


@pytest.mark.parametrize(("name", "saved"), [(None, True), (N.VOLATILE_STOP, False)])
def test_volatile_stop_does_not_save_the_request_to_stop(tmp_path: Path, name: MutantName | None,
                                                         saved: bool) -> None:
    paths = make_paths(tmp_path)
    with mutant(name), StubProvider(_stop_script) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "stopped", "the run still stops, from memory"
    assert bool(_repair(paths).get("terminate")) is saved
    assert paths.entries()[-1]["outcome"] == "stopped"


# -- call ids ------------------------------------------------------------------------------------
def test_session_call_ids_takes_an_old_result_for_a_new_call_with_the_same_id() -> None:
    entries = [*_prompt(),
               R.message("m2.0", "run-1", Role.ASSISTANT, None, tool_calls=[call("call_0", "read")]),
               R.message("m3.0", "run-1", Role.TOOL, "ok", tool_call_id="call_0", tool_name="read"),
               R.message("m4.0", "run-1", Role.ASSISTANT, None, tool_calls=[call("call_0", "bash")])]
    assert [c.tool for c in fold(entries).pending_calls()] == ["bash"]
    with mutant(N.SESSION_CALL_IDS):
        assert fold(entries).pending_calls() == []


# -- what a continuation sends -------------------------------------------------------------------
@pytest.mark.parametrize(("name", "users"), [
    (None, ["task"]), (N.RESEND_TASK, ["task", "task"]), (N.BARE_CONTINUE, ["task", "continue"])])
def test_a_resume_sends_only_the_committed_history(tmp_path: Path, name: MutantName | None,
                                                  users: list[str]) -> None:
    paths = make_paths(tmp_path)
    write_log(paths, _prompt())
    (request,) = _recover(paths, name)
    assert [m["content"] for m in request if m["role"] == "user"] == users


# -- the inbox -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "kept"), [(None, True), (N.VOLATILE_INBOX, False)])
def test_volatile_inbox_takes_input_off_the_queue_without_saving_it(
        tmp_path: Path, name: MutantName | None, kept: bool) -> None:
    paths = make_paths(tmp_path)
    write_log(paths, _prompt())
    inbox.deliver(paths.session / "inbox", inbox.InboxKind.INPUT, "also this", "in-1")
    with mutant(name), make_agent(paths, None) as agent:
        agent._take_inbox("run-1")
        # A crash here: what survives is the store and the inbox directory.
    with make_agent(paths, None) as after:
        survived = bool(after.state.queued_inputs) or bool(inbox.poll(after.inbox_dir))
    assert survived is kept


def test_volatile_inbox_saves_an_input_in_the_shape_of_the_correct_agent_when_used(
        tmp_path: Path) -> None:
    paths = make_paths(tmp_path)

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        if not any(m["role"] == "tool" for m in messages):
            inbox.deliver(paths.session / "inbox", inbox.InboxKind.INPUT, "also this", "in-1")
            return tool_calls(call("c1", "read", path="CHANGELOG.md"))
        return answer("ok")

    with mutant(N.VOLATILE_INBOX), StubProvider(script) as stub, make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "completed"
        assert stub.requests[-1][-1] == {"role": "user", "content": "also this"}
    assert ["input_queued", "message", "input_consumed"] in _types(paths)
    assert json.dumps(paths.entries()).count("in-1") == 2


# -- the session lock ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", [None, N.RECOVER_NO_LOCK])
def test_recover_no_lock_recovers_a_session_another_process_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: MutantName | None) -> None:
    paths = make_paths(tmp_path)
    write_log(paths, _prompt())  # an open run: a recovery has work to do
    holder = SessionLock(paths.session / "session.lock")
    holder.acquire()  # a second open file: its flock conflicts with the agent's, as another process's
    common = ["--session", str(paths.session), "--workspace", str(paths.workspace)]
    try:
        with mutant(name):
            # The mutant skips the lock in `recover` only: a `run` is still refused.
            assert cli.main([*common, "run", "task"]) == cli.EXIT_SESSION
            recovered = cli.main([*common, "recover"])
    finally:
        holder.release()
    err = capsys.readouterr().err
    assert f"is locked by pid {os.getpid()}" in err
    if name is None:
        assert recovered == cli.EXIT_SESSION
        assert len(paths.commits()) == 1, "a refused recovery writes nothing"
    else:
        assert recovered != cli.EXIT_SESSION
        assert err.count("is locked by") == 1
        assert len(paths.commits()) > 1, "the lock-free recovery wrote the held session"
