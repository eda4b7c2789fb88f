"""Each recovery rule (docs/architecture.md), on logs built by the test (pure planner, no I/O)."""

from __future__ import annotations

import json

import pytest

from crashmatrix.agent import records as R
from crashmatrix.agent.records import Entry, Intent, Outcome, Replay, Role
from crashmatrix.agent.recovery import Action, RecoveryBranch, RecoveryError, plan
from crashmatrix.agent.state import fold

SAFE_NOW = {"read": Replay.SAFE, "append_note": Replay.NEVER}
B = RecoveryBranch


def _call(call_id: str, tool: str, **args: str) -> dict[str, object]:
    return {"id": call_id, "type": "function",
            "function": {"name": tool, "arguments": json.dumps(args)}}


def _prompt(run: str = "run-1") -> list[Entry]:
    return [R.run_started(run, Intent.PROMPT), R.message("m1", run, Role.USER, "task")]


def _assistant(*calls: dict[str, object], run: str = "run-1", mid: str = "m2") -> Entry:
    return R.message(mid, run, Role.ASSISTANT, None, tool_calls=list(calls))


def _started(call_id: str, tool: str, replay: Replay, run: str = "run-1", aid: str = "m2") -> Entry:
    return R.tool_started(run, aid, call_id, tool, {"path": "x"}, f"r-{call_id}", replay)


def _result(call_id: str, tool: str, run: str = "run-1", **kw: bool) -> Entry:
    return R.message(f"r-{call_id}", run, Role.TOOL, "ok", tool_call_id=call_id, tool_name=tool, **kw)


def _plan(entries: list[Entry], policies: dict[str, Replay] = SAFE_NOW, budget: int = 3,
          cancel: str | None = None):  # type: ignore[no-untyped-def]
    return plan(fold(entries), policies, budget=budget, pending_cancel=cancel)


def test_no_open_run_means_nothing() -> None:
    entries = [*_prompt(), R.message("m2", "run-1", Role.ASSISTANT, "done"),
               R.run_finished("run-1", Outcome.COMPLETED)]
    p = _plan(entries)
    assert p.action is Action.NOTHING
    assert p.branches == [B.NO_OPEN_RUN]


@pytest.mark.parametrize("outcome", [Outcome.CANCELLED, Outcome.STOPPED, Outcome.FAILED])
def test_closed_runs_are_never_resumed(outcome: Outcome) -> None:
    entries = [*_prompt(), _assistant(_call("c1", "read", path="x")), _started("c1", "read", Replay.SAFE),
               _result("c1", "read"), R.run_finished("run-1", outcome)]
    assert _plan(entries).action is Action.NOTHING


def test_never_call_without_result_gets_unknown_and_continues() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "append_note", line="x")),
               _started("c1", "append_note", Replay.NEVER)]
    p = _plan(entries)
    assert p.action is Action.CONTINUE
    assert [(r.call.call_id, r.rerun, r.branch) for r in p.repairs] == [
        ("c1", False, B.CALL_UNKNOWN_RECORDED_NEVER)]
    assert p.branches == [B.CALL_UNKNOWN_RECORDED_NEVER, B.CONTINUE_AFTER_TOOL_RESULT]
    assert p.resume_attempt == 1


def test_safe_call_is_rerun_with_recorded_args() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "read", path="x")), _started("c1", "read", Replay.SAFE)]
    (repair,) = _plan(entries).repairs
    assert repair.rerun
    assert repair.args == {"path": "x"}
    assert repair.branch is B.CALL_RERUN


def test_recorded_safe_but_registered_never_now_is_unknown() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "read", path="x")), _started("c1", "read", Replay.SAFE)]
    (repair,) = _plan(entries, {"read": Replay.NEVER}).repairs
    assert not repair.rerun
    assert repair.branch is B.CALL_UNKNOWN_POLICY_NOW_NEVER


def test_recorded_never_but_safe_now_is_unknown() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "read", path="x")), _started("c1", "read", Replay.NEVER)]
    (repair,) = _plan(entries, {"read": Replay.SAFE}).repairs
    assert not repair.rerun
    assert repair.branch is B.CALL_UNKNOWN_RECORDED_NEVER


def test_unregistered_tool_is_unknown() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "read", path="x")), _started("c1", "read", Replay.SAFE)]
    (repair,) = _plan(entries, {}).repairs
    assert not repair.rerun


def test_call_without_tool_started_is_unknown() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "read", path="x"))]
    (repair,) = _plan(entries).repairs
    assert not repair.rerun
    assert repair.branch is B.CALL_UNKNOWN_NOT_STARTED


def test_parallel_calls_only_missing_ones_are_resolved() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "append_note"), _call("c2", "read")),
               _started("c1", "append_note", Replay.NEVER), _result("c1", "append_note"),
               _started("c2", "read", Replay.SAFE)]
    p = _plan(entries)
    assert [(r.call.call_id, r.rerun) for r in p.repairs] == [("c2", True)]


def test_results_match_only_the_last_assistant_message() -> None:
    # call id "c1" is reused by the provider in a later turn: the old result must not pair with it.
    entries = [*_prompt(), _assistant(_call("c1", "read")), _started("c1", "read", Replay.SAFE),
               _result("c1", "read"), _assistant(_call("c1", "append_note"), mid="m5"),
               _started("c1", "append_note", Replay.NEVER, aid="m5")]
    p = _plan(entries)
    assert [(r.call.tool, r.branch) for r in p.repairs] == [("append_note", B.CALL_UNKNOWN_RECORDED_NEVER)]


def test_tip_tool_result_continues() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "read")), _started("c1", "read", Replay.SAFE),
               _result("c1", "read")]
    p = _plan(entries)
    assert (p.action, p.repairs, p.branches) == (Action.CONTINUE, [], [B.CONTINUE_AFTER_TOOL_RESULT])


def test_tip_user_message_continues() -> None:
    p = _plan(_prompt())
    assert (p.action, p.branches) == (Action.CONTINUE, [B.CONTINUE_AFTER_USER_MESSAGE])


def test_unresolved_retry_continues() -> None:
    p = _plan([*_prompt(), R.retry_pending("run-1", 1, 0.0, "HTTP 500")])
    assert (p.action, p.branches) == (Action.CONTINUE, [B.CONTINUE_RETRY_PENDING])


def test_retry_resolved_by_a_later_message_is_not_pending() -> None:
    entries = [*_prompt(), R.retry_pending("run-1", 1, 0.0, "HTTP 500"),
               _assistant(_call("c1", "read")), _started("c1", "read", Replay.SAFE), _result("c1", "read")]
    assert _plan(entries).branches == [B.CONTINUE_AFTER_TOOL_RESULT]


def test_terminate_result_closes_stopped() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "stop_run")), _started("c1", "stop_run", Replay.NEVER),
               _result("c1", "stop_run", terminate=True)]
    p = _plan(entries)
    assert (p.action, p.branches) == (Action.CLOSE_STOPPED, [B.CLOSE_STOPPED_BY_TOOL])


def test_pending_cancel_closes_cancelled_after_repair() -> None:
    entries = [*_prompt(), _assistant(_call("c1", "append_note")),
               _started("c1", "append_note", Replay.NEVER)]
    p = _plan(entries, cancel="k1")
    assert p.action is Action.CLOSE_CANCELLED
    assert p.cancel_id == "k1"
    assert len(p.repairs) == 1, "the unpaired call is still repaired before closing"


def test_budget_counts_resume_attempts_durably() -> None:
    entries = [*_prompt(), R.run_finished("run-1", Outcome.ABORTED, "interrupted"),
               R.run_started("run-3", Intent.RESUME, "run-1", 3)]
    p = _plan(entries, budget=3)
    assert (p.action, p.branches) == (Action.CLOSE_BUDGET, [B.CLOSE_BUDGET_EXHAUSTED])
    assert _plan(entries, budget=4).resume_attempt == 4


def test_two_open_runs_are_corrupt() -> None:
    with pytest.raises(RecoveryError, match="more than one open run"):
        _plan([*_prompt("run-1"), *_prompt("run-2")])


def test_final_answer_without_run_finished_is_refused() -> None:
    with pytest.raises(RecoveryError, match="final answer"):
        _plan([*_prompt(), R.message("m2", "run-1", Role.ASSISTANT, "done")])
