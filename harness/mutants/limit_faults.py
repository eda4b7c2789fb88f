"""Limits reached one off: a step limit one reply late or early, a budget or retries one early."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from crashmatrix.agent import loop, recovery
from crashmatrix.agent.loop import Agent
from crashmatrix.agent.records import Replay
from crashmatrix.agent.recovery import Plan
from crashmatrix.agent.state import SessionState
from crashmatrix.harness.mutants.patching import Patcher

Planner = Callable[..., Plan]


def max_steps_one_late(p: Patcher) -> None:
    def at_step_limit(self: Agent, run_id: str) -> bool:
        # The fault: `>` where `>=` belongs, so the chain gets a reply past its limit.
        return self.state.chain_replies(run_id) > self.config.max_steps

    p.replace(Agent, "_at_step_limit", at_step_limit)


def max_steps_one_early(p: Patcher) -> None:
    def at_step_limit(self: Agent, run_id: str) -> bool:
        # The fault: the reply about to be asked for is counted as already had.
        return self.state.chain_replies(run_id) + 1 >= self.config.max_steps

    p.replace(Agent, "_at_step_limit", at_step_limit)


def retries_one_early(p: Patcher) -> None:
    def may_retry(self: Agent, attempt: int) -> bool:
        # The fault: max_retries read as the attempts in all, the first request included.
        return attempt < self.config.max_retries

    p.replace(Agent, "_may_retry", may_retry)


def resume_budget_one_early(p: Patcher) -> None:
    # The loop imported `plan` by name: the fault replaces `agent.loop.plan` and wraps the
    # correct planner, `agent.recovery.plan`.
    correct: Planner = recovery.plan

    def plan(s: SessionState, current: Mapping[str, Replay], *, budget: int,
             pending_cancel: str | None = None) -> Plan:
        run = s.open_run()
        # The fault: a run that is itself a resume is counted twice, by its attempt number and
        # again for being a resume. A first resume is planned right, so a budget of 1 hides it;
        # from the second on, the chain is closed one resume early.
        twice = 1 if run is not None and run.resumed_from is not None else 0
        return correct(s, current, budget=budget - twice, pending_cancel=pending_cancel)

    p.replace(loop, "plan", plan)
