"""Faulty recovery rules: how a restarted agent decides what to re-run, resume and record."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from crashmatrix.agent import loop, recovery, state
from crashmatrix.agent import records as R
from crashmatrix.agent.loop import Agent
from crashmatrix.agent.records import Entry, EntryType, Intent, Outcome, Replay, Role
from crashmatrix.agent.recovery import Action, CallRepair, Plan, RecoveryBranch, parse_args
from crashmatrix.agent.state import PendingCall, RunInfo, SessionState
from crashmatrix.harness.mutants.patching import Patcher

B = RecoveryBranch
Resolve = Callable[[PendingCall, Mapping[str, Replay]], CallRepair]
Planner = Callable[..., Plan]
Commit = Callable[[Agent, list[Entry]], int]
# The loop imported `plan` by name: a planner fault replaces `agent.loop.plan`, and wraps the
# correct planner, `agent.recovery.plan`.
FINAL = frozenset({Outcome.COMPLETED.value, Outcome.CANCELLED.value, Outcome.STOPPED.value})


def rerun_never(p: Patcher) -> None:
    def resolve_call(call: PendingCall, current: Mapping[str, Replay]) -> CallRepair:
        if call.started is None:
            return CallRepair(call, False, B.CALL_UNKNOWN_NOT_STARTED)
        # The fault: neither the recorded policy nor the registered one is consulted.
        return CallRepair(call, True, B.CALL_RERUN, args=call.started.get("args"))

    p.replace(recovery, "resolve_call", resolve_call)


def current_policy_only(p: Patcher) -> None:
    def resolve_call(call: PendingCall, current: Mapping[str, Replay]) -> CallRepair:
        if call.started is None:
            return CallRepair(call, False, B.CALL_UNKNOWN_NOT_STARTED)
        if current.get(call.tool) != Replay.SAFE:
            return CallRepair(call, False, B.CALL_UNKNOWN_POLICY_NOW_NEVER)
        # The fault: the policy the call was started under (tool_started.replay) is ignored.
        return CallRepair(call, True, B.CALL_RERUN, args=call.started.get("args"))

    p.replace(recovery, "resolve_call", resolve_call)


def drop_tool_started(p: Patcher) -> None:
    """Commit everything but `tool_started`; a commit left empty is not written at all."""
    commit: Commit = Agent.commit

    def commit_without_starts(self: Agent, entries: list[Entry]) -> int:
        kept = [e for e in entries if e["type"] != EntryType.TOOL_STARTED]
        return commit(self, kept) if kept else self.log.next_seq - 1

    p.replace(Agent, "commit", commit_without_starts)


def no_tool_started(p: Patcher) -> None:
    drop_tool_started(p)
    correct: Resolve = recovery.resolve_call

    def resolve_call(call: PendingCall, current: Mapping[str, Replay]) -> CallRepair:
        if call.started is None:
            # The fault: no record of a start is read as "never ran", so it runs now.
            return CallRepair(call, True, B.CALL_RERUN, args=parse_args(call.args_json))
        return correct(call, current)

    p.replace(recovery, "resolve_call", resolve_call)


def _last_run(s: SessionState) -> RunInfo | None:
    # Runs are folded in log order, and dicts keep insertion order.
    return list(s.runs.values())[-1] if s.runs else None


def resume_finished(p: Patcher) -> None:
    correct: Planner = recovery.plan
    apply: Callable[[Agent, Plan], str] = Agent._apply

    def plan(s: SessionState, current: Mapping[str, Replay], *, budget: int,
             pending_cancel: str | None = None) -> Plan:
        decided = correct(s, current, budget=budget, pending_cancel=pending_cancel)
        run = s.open_run()
        if decided.action is Action.CLOSE_STOPPED and run is not None:
            # The fault: a tool's request to stop is read as one more result to continue from.
            return dataclasses.replace(
                decided, action=Action.CONTINUE, resume_attempt=run.resume_attempt + 1,
                branches=[*decided.branches[:-1], B.CONTINUE_AFTER_TOOL_RESULT])
        last = _last_run(s)
        if decided.action is Action.NOTHING and last is not None and last.outcome in FINAL:
            # The fault: "the last run" is resumed whatever its outcome says.
            return Plan(Action.CONTINUE, last.run_id, branches=[B.CONTINUE_AFTER_TOOL_RESULT],
                        resume_attempt=last.resume_attempt + 1)
        return decided

    def apply_plan(self: Agent, decided: Plan) -> str:
        origin = self.state.runs.get(decided.run_id or "")
        if decided.action is not Action.CONTINUE or origin is None or origin.open:
            return apply(self, decided)
        run_id = f"run-{self.log.next_seq}"
        self.commit([R.run_started(run_id, Intent.RESUME, origin.run_id, decided.resume_attempt)])
        return self.drive(run_id)

    p.replace(loop, "plan", plan)
    p.replace(Agent, "_apply", apply_plan)


def volatile_resume_count(p: Patcher) -> None:
    correct: Planner = recovery.plan

    def plan(s: SessionState, current: Mapping[str, Replay], *, budget: int,
             pending_cancel: str | None = None) -> Plan:
        # The fault: the count lives in this process, so every incarnation starts again at 0.
        forgetful = dataclasses.replace(
            s, runs={k: dataclasses.replace(r, resume_attempt=0) for k, r in s.runs.items()})
        return correct(forgetful, current, budget=budget, pending_cancel=pending_cancel)

    p.replace(loop, "plan", plan)


def split_recovery_commit(p: Patcher) -> None:
    commit: Commit = Agent.commit

    def commit_in_two(self: Agent, entries: list[Entry]) -> int:
        repairs = [e for e in entries if e["type"] == EntryType.MESSAGE]
        rest = [e for e in entries if e["type"] != EntryType.MESSAGE]
        resumes = any(e["type"] == EntryType.RUN_STARTED and e["intent"] == Intent.RESUME
                      for e in rest)
        if not (repairs and resumes):
            return commit(self, entries)
        # The fault: the interrupted run is closed (and its continuation opened) first; the
        # results that repair its calls follow in a commit of their own.
        commit(self, rest)
        return commit(self, repairs)

    p.replace(Agent, "commit", commit_in_two)


def session_call_ids(p: Patcher) -> None:
    def pending_calls(messages: list[Entry], started: list[Entry]) -> list[PendingCall]:
        assistants = [m for m in messages if m["role"] == Role.ASSISTANT]
        if not assistants:
            return []
        # The fault: a call counts as answered by any result with its id, anywhere in the
        # session, and its tool_started is any record with that id.
        answered = {m.get("tool_call_id") for m in messages if m["role"] == Role.TOOL}
        started_by_call = {s["call_id"]: s for s in started}
        return [PendingCall(c["id"], str(c["function"]["name"]), str(c["function"]["arguments"]),
                            started_by_call.get(c["id"]))
                for c in assistants[-1].get("tool_calls") or [] if c["id"] not in answered]

    p.replace(state, "pending_calls", pending_calls)


def fresh_result_id(p: Patcher) -> None:
    repair: Callable[[Agent, str, CallRepair], Entry] = Agent._repair_message

    def repair_message(self: Agent, run_id: str, r: CallRepair) -> Entry:
        entry = repair(self, run_id, r)
        if r.call.started is None:
            return entry
        # The fault: recovery names its repairs by its own scheme, as if nothing had been
        # reserved, instead of taking the result id the call's tool_started reserved.
        return {**entry, "id": f"m{self.log.next_seq}.c-{r.call.call_id}"}

    p.replace(Agent, "_repair_message", repair_message)
