"""Recovery rules (docs/architecture.md): a pure planner from session state to a recovery plan.

The planner decides; `Agent.recover` carries the plan out. Keeping the decision pure lets the
unit tests check every rule on logs they build, without processes or files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from crashmatrix.agent.records import Replay, Role
from crashmatrix.agent.state import PendingCall, SessionState


class RecoveryBranch(StrEnum):
    """Every named recovery decision; each is reported through a `recovery.branch` probe."""

    TORN_TAIL_REPAIRED = "open.torn_tail_repaired"
    NO_OPEN_RUN = "nothing.no_open_run"
    CALL_RERUN = "call.rerun_safe"
    CALL_UNKNOWN_RECORDED_NEVER = "call.unknown_recorded_never"
    CALL_UNKNOWN_POLICY_NOW_NEVER = "call.unknown_policy_now_never"
    CALL_UNKNOWN_NOT_STARTED = "call.unknown_no_tool_started"
    CONTINUE_AFTER_TOOL_RESULT = "continue.after_tool_result"
    CONTINUE_AFTER_USER_MESSAGE = "continue.after_user_message"
    CONTINUE_RETRY_PENDING = "continue.retry_pending"
    CLOSE_STOPPED_BY_TOOL = "close.stopped_by_tool"
    CLOSE_CANCEL_PENDING = "close.cancel_pending"
    CLOSE_BUDGET_EXHAUSTED = "close.budget_exhausted"


DECLARED_BRANCHES: tuple[str, ...] = tuple(b.value for b in RecoveryBranch)


class Action(StrEnum):
    NOTHING = "nothing"
    CONTINUE = "continue"
    CLOSE_STOPPED = "close_stopped"
    CLOSE_CANCELLED = "close_cancelled"
    CLOSE_BUDGET = "close_budget"


class RecoveryError(RuntimeError):
    """The log is readable but breaks the commit rules; recovery will not guess."""


@dataclass(frozen=True)
class CallRepair:
    call: PendingCall
    rerun: bool
    branch: RecoveryBranch
    args: Any = None  # effective arguments to re-run with (from tool_started)


@dataclass(frozen=True)
class Plan:
    action: Action
    run_id: str | None = None
    repairs: list[CallRepair] = field(default_factory=list)
    branches: list[RecoveryBranch] = field(default_factory=list)
    resume_attempt: int = 0
    cancel_id: str | None = None


def resolve_call(call: PendingCall, current: Mapping[str, Replay]) -> CallRepair:
    """Re-run only when the recorded policy and the policy registered now are both safe."""
    started = call.started
    if started is None:
        return CallRepair(call, False, RecoveryBranch.CALL_UNKNOWN_NOT_STARTED)
    if started.get("replay") != Replay.SAFE:
        return CallRepair(call, False, RecoveryBranch.CALL_UNKNOWN_RECORDED_NEVER)
    if current.get(call.tool) != Replay.SAFE:
        return CallRepair(call, False, RecoveryBranch.CALL_UNKNOWN_POLICY_NOW_NEVER)
    return CallRepair(call, True, RecoveryBranch.CALL_RERUN, args=started.get("args"))


def plan(
    state: SessionState,
    current_policies: Mapping[str, Replay],
    *,
    budget: int,
    pending_cancel: str | None = None,
) -> Plan:
    """Decide what recovery does for this state. Never performs I/O."""
    open_runs = state.open_runs()
    if not open_runs:
        return Plan(Action.NOTHING, branches=[RecoveryBranch.NO_OPEN_RUN])
    if len(open_runs) > 1:
        ids = ", ".join(r.run_id for r in open_runs)
        raise RecoveryError(f"more than one open run ({ids}); the log is corrupt")
    run = open_runs[0]

    repairs = [resolve_call(c, current_policies) for c in state.pending_calls()]
    branches = [r.branch for r in repairs]
    rid = run.run_id

    if pending_cancel is not None:
        branches.append(RecoveryBranch.CLOSE_CANCEL_PENDING)
        return Plan(Action.CLOSE_CANCELLED, rid, repairs, branches, cancel_id=pending_cancel)

    if _stopped_by_tool(state):
        branches.append(RecoveryBranch.CLOSE_STOPPED_BY_TOOL)
        return Plan(Action.CLOSE_STOPPED, rid, repairs, branches)

    tip = state.tip
    if state.last_retry is not None and state.last_retry.get("run_id") in _chain(state, run.run_id):
        reason = RecoveryBranch.CONTINUE_RETRY_PENDING
    elif repairs or (tip is not None and tip["role"] == Role.TOOL):
        reason = RecoveryBranch.CONTINUE_AFTER_TOOL_RESULT
    elif tip is not None and tip["role"] == Role.USER:
        reason = RecoveryBranch.CONTINUE_AFTER_USER_MESSAGE
    elif tip is not None and tip["role"] == Role.ASSISTANT and not tip.get("tool_calls"):
        raise RecoveryError(
            f"run {run.run_id} ends in a final answer ({tip['id']}) without run_finished; "
            "the commit rules put both in one commit"
        )
    else:
        raise RecoveryError(f"run {run.run_id} has no message to continue from")

    attempt = run.resume_attempt + 1
    if attempt > budget:
        branches.append(RecoveryBranch.CLOSE_BUDGET_EXHAUSTED)
        return Plan(Action.CLOSE_BUDGET, rid, repairs, branches, resume_attempt=attempt)
    branches.append(reason)
    return Plan(Action.CONTINUE, rid, repairs, branches, resume_attempt=attempt)


def _stopped_by_tool(state: SessionState) -> bool:
    """A result after the last assistant message asked the run to stop."""
    for m in reversed(state.messages):
        if m["role"] != Role.TOOL:
            return False
        if m.get("terminate"):
            return True
    return False


def _chain(state: SessionState, run_id: str) -> set[str]:
    """The run and every run it resumed from: a retry_pending of any of them is still owed."""
    chain: set[str] = set()
    current: str | None = run_id
    while current is not None and current not in chain:
        chain.add(current)
        info = state.runs.get(current)
        current = info.resumed_from if info else None
    return chain


def parse_args(args_json: str) -> Any:
    """The call's arguments, or None when they are not valid JSON text.

    JSON may escape a lone surrogate (`"\\ud800"`), which no UTF-8 file, path or command can
    hold: such arguments would fail the `tool_started` commit and every recovery after it, so
    they count as invalid here, before anything is committed or run.
    """
    try:
        args = json.loads(args_json) if args_json else {}
        json.dumps(args, ensure_ascii=False).encode()
    except ValueError:  # UnicodeEncodeError is one
        return None
    return args
