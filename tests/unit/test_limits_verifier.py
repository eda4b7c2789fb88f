"""Limits reached one early or one late: retry-bound (max_steps, max_retries), resume-budget, turns."""

from __future__ import annotations

import msgspec
import pytest

from crashmatrix.agent import records as R
from crashmatrix.agent.records import Outcome
from crashmatrix.agent.recovery import RecoveryBranch as B
from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.verify import InvariantId, Violation, verify
from crashmatrix.harness.verify.exercised import exercised
from crashmatrix.harness.verify.off_by import off_by
from crashmatrix.harness.verify.resume_budget import check_resume_budget
from crashmatrix.harness.verify.retry_bound import check_retry_bound
from crashmatrix.scenarios.model import AgentSettings, Expect, Scenario
from crashmatrix.scenarios.model import Outcome as Expected
from tests.support.observations import READ, ObservationBuilder, changelog_scenario
from tests.support.step_observations import down_builder, failing_scenario

BOUND, BUDGET, ORACLE = InvariantId.RETRY_BOUND, InvariantId.RESUME_BUDGET, InvariantId.SCENARIO_ORACLE
STEP_LIMIT = "step limit 2 reached"


def scenario(*, max_steps: int = 100, max_retries: int = 3, turns: int | None = None,
             outcome: Expected = Expected.FAILED) -> Scenario:
    s = changelog_scenario(Expect(outcome=(outcome,), turns=turns))
    return msgspec.structs.replace(s, agent=AgentSettings(max_steps=max_steps, max_retries=max_retries))


def end_for_steps(b: ObservationBuilder, run_id: str) -> None:
    """agent/loop.py `_finish_at_step_limit`: a notice and the failed close, no request."""
    b.poll()
    b.commit([R.notice(run_id, "reached the step limit"),
              R.run_finished(run_id, Outcome.FAILED, STEP_LIMIT)])
    b.exit(1)
    b.settle()


def steps(replies: int) -> Observation:
    """A run of `replies` read turns, then ended for its step limit."""
    b = ObservationBuilder()
    run_id = b.start()
    for _ in range(replies):
        b.turn(run_id, READ)
    end_for_steps(b, run_id)
    return b.build()


def messages(found: list[Violation]) -> list[str]:
    return [v.message for v in found]


def test_off_by_names_the_gap() -> None:
    assert [off_by(n, 3) for n in (1, 2, 3, 4, 6)] == [
        "2 early", "one early", "exactly at the limit", "one late", "3 late"]


# -- max_steps ---------------------------------------------------------------------------------
def test_a_chain_ended_at_exactly_max_steps_holds() -> None:
    assert check_retry_bound(steps(2), scenario(max_steps=2)) == []


def test_a_chain_ended_for_its_step_limit_one_reply_early() -> None:
    (v,) = check_retry_bound(steps(1), scenario(max_steps=2))
    assert v.invariant is BOUND
    assert v.message == ("run run-1 was ended for its step limit at commit 5 after 1 model replies "
                         "in its chain (run-1); max_steps 2 allows 2: the limit was reached one early")
    assert v.evidence == {"run": "run-1", "finished_seq": 5, "replies": 1, "max_steps": 2}


def test_a_reply_past_max_steps_is_one_late() -> None:
    (v,) = check_retry_bound(steps(3), scenario(max_steps=2))
    assert v.message == ("run chain run-1 has 3 model replies, the 3rd (m8.0) at commit 8; "
                         "max_steps 2 ends a chain at its 2nd reply: the limit was reached one late")
    assert v.evidence["replies"] == 3


def test_replies_count_across_the_runs_that_resume_a_chain() -> None:
    # One reply before a crash, two after the resume: the chain has three, past max_steps 2.
    b = ObservationBuilder()
    run_id = b.start()
    b.turn(run_id, READ)
    b.kill()
    b.incarnation()
    b.branch(B.CONTINUE_AFTER_TOOL_RESULT)
    new = b.resume(run_id, [], attempt=1)
    b.turn(new, READ)
    b.turn(new, READ)
    end_for_steps(b, new)
    (v,) = check_retry_bound(b.build(), scenario(max_steps=2))
    assert v.message.startswith("run chain run-1 → run-5 has 3 model replies")
    assert v.message.endswith("one late")


def test_a_request_after_the_last_allowed_reply_is_one_late_even_unanswered() -> None:
    # The third request was made, and the agent killed before its reply was committed: the
    # store holds 2 replies, the trace shows the request the limit forbade.
    b = ObservationBuilder()
    run_id = b.start()
    b.turn(run_id, READ)
    b.turn(run_id, READ)
    b.poll()
    b.request(tool_calls=1)
    b.kill()
    b.incarnation()
    b.branch(B.CONTINUE_AFTER_TOOL_RESULT)
    new = b.resume(run_id, [], attempt=1)
    end_for_steps(b, new)
    (v,) = check_retry_bound(b.build(), scenario(max_steps=2))
    assert v.message == ("run chain run-1 → run-8 asked the provider again (inc1#34 "
                         "provider.before:chat) after its 2nd model reply (m5.0, commit 5); "
                         "max_steps 2 ends a chain there: the limit was reached one late")
    assert v.evidence["events"] == ["inc1#34"]


def test_the_step_limit_is_retry_bound_in_the_verifier() -> None:
    found = verify(steps(1), scenario(max_steps=2))
    assert BOUND in {v.invariant for v in found}
    assert exercised(steps(2)) >= {BOUND}, "a run ended failed: a limit may have ended it"


# -- max_retries: giving up early ----------------------------------------------------------------
def given_up(failures: int, *, status: int = 500) -> Observation:
    """Every request fails; attempts 1.. are recorded, and the run ends failed at the last one."""
    b = ObservationBuilder()
    run_id = b.start()
    for attempt in range(1, failures):
        b.retry(run_id, attempt)
    b.poll()
    b.request(status, "http_500" if status == 500 else None)
    b.commit([R.run_finished(run_id, Outcome.FAILED, f"provider: HTTP {status}")])
    b.exit(1)
    b.settle()
    return b.build()


def test_giving_up_at_the_failure_after_the_last_retry_holds() -> None:
    assert check_retry_bound(given_up(3), scenario(max_retries=2)) == []


def test_giving_up_one_retry_early() -> None:
    (v,) = check_retry_bound(given_up(2), scenario(max_retries=2))
    assert v.invariant is BOUND
    assert v.message == ("run run-1 ended failed at commit 3 after 2 retryable provider failure(s) in "
                         "all (#0 (http_500), #1 (http_500)); max_retries 2 allows 2 retries, so a run "
                         "gives up at failure 3: it gave up one early")
    assert v.evidence == {"run": "run-1", "finished_seq": 3, "failures": 2, "requests": [0, 1],
                          "max_retries": 2}


def test_too_many_failures_of_a_step_say_how_late() -> None:
    # Two retries past max_retries 3, one crash after a failure: 6 failures where 5 are allowed.
    found = check_retry_bound(down_builder(extra=2).build(), failing_scenario())
    assert [v.invariant for v in found] == [BOUND, BOUND]
    assert found[1].message.endswith("so at most 5; the attempt count must survive crashes (the "
                                      "limit was passed one late)")


def test_a_refusal_is_not_a_give_up() -> None:
    # A 400 ends a run at once: no retry was owed, so it is not early.
    assert check_retry_bound(given_up(1, status=400), scenario(max_retries=2)) == []


def test_without_a_store_the_give_up_is_not_judged() -> None:
    obs = given_up(2)
    obs.store_read = False
    assert check_retry_bound(obs, scenario(max_retries=2)) == []


# -- resume_budget -------------------------------------------------------------------------------
def budget_closed(resumes: int, budget: int) -> Observation:
    """A run dies at its first poll; it is resumed `resumes` times, each dying the same way, and
    then closed for its budget."""
    b = ObservationBuilder(resume_budget=budget)
    run_id = b.start()
    for attempt in range(1, resumes + 1):
        b.poll()
        b.kill()
        b.incarnation()
        b.branch(B.CONTINUE_AFTER_USER_MESSAGE)
        run_id = b.resume(run_id, [], attempt=attempt)
    b.poll()
    b.kill()
    b.incarnation()
    b.branch(B.CLOSE_BUDGET_EXHAUSTED)
    b.commit([R.notice(run_id, "the resume budget is used up"),
              R.run_finished(run_id, Outcome.ABORTED, f"resume budget {budget} exhausted")])
    b.exit(1)
    b.settle()
    return b.build()


@pytest.mark.parametrize("budget", [0, 1, 2])
def test_a_close_when_the_budget_is_spent_holds(budget: int) -> None:
    obs = budget_closed(budget, budget)
    assert check_resume_budget(obs, changelog_scenario(resume_budget=budget)) == []
    assert BUDGET in exercised(obs)


def test_a_close_one_resume_early() -> None:
    (v,) = check_resume_budget(budget_closed(1, 2), changelog_scenario(resume_budget=2))
    assert v.invariant is BUDGET
    assert v.message == ("run run-2 was closed for its resume budget at commit 3 as resume attempt 1; "
                         "the budget of 2 allows 2 resume(s) before a close: it was closed one early")
    assert v.evidence == {"run": "run-2", "finished_seq": 3, "resume_attempt": 1, "budget": 2}


def test_a_close_with_no_resume_is_exercised_and_judged() -> None:
    obs = budget_closed(0, 1)
    assert BUDGET in exercised(obs), "a budget close counts, though no run was resumed"
    assert messages(check_resume_budget(obs, changelog_scenario(resume_budget=1)))[0].endswith(
        "it was closed one early")


def test_a_resume_past_the_budget_says_one_late() -> None:
    obs = budget_closed(2, 2)
    obs.resume_budget = 1  # the agent was told 2, the harness 1: the second resume is past it
    (v,) = check_resume_budget(obs, changelog_scenario(resume_budget=1))
    assert v.message == ("run run-3 (commit 3) is resume attempt 2, past the resume budget of 1 "
                         "(one late: recovery had to close the chain instead)")


# -- expect.turns --------------------------------------------------------------------------------
def test_turns_must_match_exactly() -> None:
    assert [v for v in verify(steps(2), scenario(max_steps=2, turns=2)) if v.invariant is ORACLE] == []
    (v,) = [v for v in verify(steps(1), scenario(max_steps=2, turns=2)) if v.invariant is ORACLE]
    assert v.message == ("the history holds 1 assistant message(s) (m2.0); the scenario expects "
                         "exactly 2")
    assert v.evidence == {"turns": 1, "expected": 2, "messages": ["m2.0"]}
