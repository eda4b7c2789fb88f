"""Faulty ends of a step: a final answer that does not end its run, a retry count that restarts."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from crashmatrix.agent import loop, recovery
from crashmatrix.agent.loop import Agent
from crashmatrix.agent.records import Entry, EntryType, Outcome, Replay, Role
from crashmatrix.agent.recovery import Action, Plan, RecoveryBranch, RecoveryError
from crashmatrix.agent.state import SessionState
from crashmatrix.harness.mutants.patching import Patcher

B = RecoveryBranch
Commit = Callable[[Agent, list[Entry]], int]
Planner = Callable[..., Plan]
Step = Callable[[Agent, str], str]


def _is_answer(e: Entry) -> bool:
    return (e["type"] == EntryType.MESSAGE and e.get("role") == Role.ASSISTANT
            and not e.get("tool_calls"))


def split_final(p: Patcher) -> None:
    commit: Commit = Agent.commit
    # The loop imported `plan` by name: the fault replaces `agent.loop.plan` and wraps the
    # correct planner, `agent.recovery.plan`.
    correct: Planner = recovery.plan

    def commit_answer_apart(self: Agent, entries: list[Entry]) -> int:
        answer = [e for e in entries if _is_answer(e)]
        rest = [e for e in entries if not _is_answer(e)]
        ends = any(e["type"] == EntryType.RUN_FINISHED and e["outcome"] == Outcome.COMPLETED
                   for e in rest)
        if not (answer and ends):
            return commit(self, entries)
        # The fault: the final answer is saved in one write and the run's end in a later one.
        commit(self, answer)
        return commit(self, rest)

    def plan(s: SessionState, current: Mapping[str, Replay], *, budget: int,
             pending_cancel: str | None = None) -> Plan:
        try:
            return correct(s, current, budget=budget, pending_cancel=pending_cancel)
        except RecoveryError:
            run, tip = s.open_run(), s.tip
            if run is None or tip is None or not _is_answer(tip):
                raise
            # The fault: a run whose last message is its final answer is continued, so the
            # model is asked again after it answered.
            attempt = run.resume_attempt + 1
            if attempt > budget:
                return Plan(Action.CLOSE_BUDGET, run.run_id, branches=[B.CLOSE_BUDGET_EXHAUSTED],
                            resume_attempt=attempt)
            return Plan(Action.CONTINUE, run.run_id, branches=[B.CONTINUE_AFTER_TOOL_RESULT],
                        resume_attempt=attempt)

    p.replace(Agent, "commit", commit_answer_apart)
    p.replace(loop, "plan", plan)


def retry_reset(p: Patcher) -> None:
    drive: Step = Agent.drive

    def drive_counting_afresh(self: Agent, run_id: str) -> str:
        # The fault: the committed retry_pending is not read back when a run is driven (after a
        # recovery, say), so the attempts start again at 1 after every crash.
        self.state.last_retry = None
        return drive(self, run_id)

    p.replace(Agent, "drive", drive_counting_afresh)
