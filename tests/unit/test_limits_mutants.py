"""The off-by-one limit mutants change the agent as their catalogue entries say, in-process."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.agent import loop
from crashmatrix.agent import records as R
from crashmatrix.agent.records import Intent, Outcome, Role
from crashmatrix.agent.recovery import Action
from crashmatrix.agent.state import fold
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName, applied
from tests.support.agent_env import Paths, make_agent, make_paths, write_log
from tests.support.stub_provider import StubProvider, answer, call, tool_calls

N = MutantName
LIMIT_MUTANTS = (N.MAX_STEPS_ONE_LATE, N.MAX_STEPS_ONE_EARLY, N.RETRIES_ONE_EARLY,
                 N.RESUME_BUDGET_ONE_EARLY)
# The edge built-ins: each mutant's killers are among these (retries-exhausted is the N+1 edge
# of max_retries, older than the others).
EDGE_SCENARIOS = {"max-steps-at", "max-steps-over", "max-retries-at", "retries-exhausted",
                  "resume-budget-edge"}


@contextmanager
def mutant(name: MutantName | None) -> Iterator[None]:
    with applied(CATALOGUE[name]) if name is not None else nullcontext():
        yield


def _runaway(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return tool_calls(call(f"c{len(messages)}", "read", path="CHANGELOG.md"))


def test_each_limit_mutant_is_killed_by_an_edge_scenario() -> None:
    for name in LIMIT_MUTANTS:
        assert set(CATALOGUE[name].scenarios) <= EDGE_SCENARIOS, name


@pytest.mark.parametrize(("name", "requests"), [
    (None, 2), (N.MAX_STEPS_ONE_LATE, 3), (N.MAX_STEPS_ONE_EARLY, 1)])
def test_the_step_limit_mutants_stop_one_reply_off(tmp_path: Path, name: MutantName | None,
                                                   requests: int) -> None:
    paths = make_paths(tmp_path)
    with mutant(name), StubProvider(_runaway) as stub, make_agent(paths, stub.url) as agent:
        agent.config = dataclasses.replace(agent.config, max_steps=2)
        assert agent.run_prompt("t") == "failed"
    assert len(stub.requests) == requests
    assert paths.entries()[-1]["reason"] == "step limit 2 reached"


@pytest.mark.parametrize(("name", "outcome", "requests"), [
    (None, "completed", 3), (N.RETRIES_ONE_EARLY, "failed", 2)])
def test_retries_one_early_gives_up_before_the_last_allowed_retry(
        tmp_path: Path, name: MutantName | None, outcome: str, requests: int) -> None:
    # The provider fails twice, then answers: with max_retries 2 the second retry is the last
    # one allowed, and it succeeds.
    served: list[int] = []

    def flaky(messages: list[dict[str, Any]]) -> dict[str, Any] | int:
        served.append(1)
        return 500 if len(served) <= 2 else answer("fine")

    paths = make_paths(tmp_path)
    with mutant(name), StubProvider(flaky) as stub, make_agent(paths, stub.url) as agent:
        agent.config = dataclasses.replace(agent.config, max_retries=2)
        assert agent.run_prompt("t") == outcome
    assert len(stub.requests) == requests


def _resumed_once(paths: Paths) -> None:
    """run-1 was interrupted and resumed as run-2 (attempt 1), which was interrupted too."""
    write_log(paths, [R.run_started("run-1", Intent.PROMPT), R.message("m1.0", "run-1", Role.USER, "t")],
              [R.run_finished("run-1", Outcome.ABORTED, "interrupted"),
               R.run_started("run-2", Intent.RESUME, "run-1", 1)])


@pytest.mark.parametrize(("name", "budget", "action"), [
    (None, 2, Action.CONTINUE),
    (N.RESUME_BUDGET_ONE_EARLY, 2, Action.CLOSE_BUDGET),  # the fault: a second resume refused
    (None, 1, Action.CLOSE_BUDGET),
    (N.RESUME_BUDGET_ONE_EARLY, 1, Action.CLOSE_BUDGET),  # a budget of 1 hides it
])
def test_resume_budget_one_early_counts_a_resumed_run_twice(
        tmp_path: Path, name: MutantName | None, budget: int, action: Action) -> None:
    paths = make_paths(tmp_path)
    _resumed_once(paths)
    state = fold(paths.entries())
    with mutant(name):
        # The agent calls the planner it imported by name, which is what the mutant replaces.
        planner = vars(loop)["plan"]
        planned = planner(state, {}, budget=budget)
    assert planned.action is action


@pytest.mark.parametrize("name", [None, N.RESUME_BUDGET_ONE_EARLY])
def test_a_first_resume_is_planned_right_by_the_budget_mutant(tmp_path: Path,
                                                             name: MutantName | None) -> None:
    paths = make_paths(tmp_path)
    write_log(paths, [R.run_started("run-1", Intent.PROMPT), R.message("m1.0", "run-1", Role.USER, "t")])
    with mutant(name), StubProvider(lambda m: answer("done")) as stub, \
            make_agent(paths, stub.url, budget=1) as agent:
        assert agent.recover() == "completed"
    attempts = [e.get("resume_attempt") for e in paths.entries() if e["type"] == "run_started"]
    assert attempts == [None, 1]
