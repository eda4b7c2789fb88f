"""final-ends-run and retry-bound: one violation each, from hand-built observations, and their
clean counterparts (the evidence each reads with and without the agent's store)."""

from __future__ import annotations

import dataclasses

import msgspec

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.verify import InvariantId, judge
from crashmatrix.harness.verify.retry_bound import retryable
from crashmatrix.scenarios.model import AgentSettings, Scenario
from tests.support.observations import (
    ANSWER,
    APPEND,
    BASH,
    ObservationBuilder,
    changelog_baseline,
    changelog_scenario,
    check,
    ids,
)
from tests.support.step_observations import (
    answered_builder,
    down_builder,
    failing_scenario,
    next_prompt_builder,
)

FINAL = InvariantId.FINAL_ENDS_RUN
BOUND = InvariantId.RETRY_BOUND


def without_store(obs: Observation, scenario: Scenario) -> list[InvariantId]:
    return [v.invariant for v in judge(dataclasses.replace(obs, store_read=False), scenario).violations]


# -- final-ends-run ----------------------------------------------------------------------------
def test_the_baseline_and_a_new_prompt_after_an_answer_hold() -> None:
    assert check(changelog_baseline()) == []
    assert check(next_prompt_builder().build()) == []
    assert without_store(next_prompt_builder().build(), changelog_scenario()) == []


def test_a_crash_after_a_lone_final_answer_is_no_violation_by_itself() -> None:
    # Killed right after the answer landed: nothing asked the model again (the open run is a
    # crash state that the verdict does not blame here).
    violations = check(answered_builder(ask_again=False).build())
    assert FINAL not in ids(violations)


def test_asking_again_after_a_committed_final_answer() -> None:
    violations = check(answered_builder().build())
    assert ids(violations) == {FINAL}
    (v,) = violations
    assert v.message == (
        "inc2#6 provider.before:chat asked the model again after the final answer m8.0 of run run-1 "
        "('Added the line to CHANGELOG.md. pytest …', commit 8, landed at inc1#37), in run run-9, "
        "which resumes run run-1; a committed final answer ends its run chain")
    assert v.evidence == {"message": "m8.0", "seq": 8, "run": "run-1", "landed": "inc1#37",
                          "events": ["inc2#6"], "runs": ["run-9"]}


def test_asking_again_without_the_answer_in_the_history_is_seen_from_the_store() -> None:
    # The history sent stops before the answer: still a prefix of the store (continuation holds),
    # and no request shows the answer; only where the answer landed and the run chain tell.
    obs = answered_builder(with_answer=False).build()
    assert ids(check(obs)) == {FINAL}
    assert without_store(obs, changelog_scenario()) == []


def test_without_a_store_a_history_past_the_answer_is_still_final_ends_run() -> None:
    violated = judge(dataclasses.replace(answered_builder().build(), store_read=False),
                     changelog_scenario()).violations
    assert [v.invariant for v in violated] == [FINAL]
    assert violated[0].message.startswith("request #3 asked the model again after its final answer "
                                          "(message index 5, after the system message")
    assert violated[0].evidence["requests"] == [3]


# -- retry-bound -------------------------------------------------------------------------------
def test_retries_that_count_on_across_a_crash_hold() -> None:
    assert check(down_builder().build(), failing_scenario()) == []


def test_a_crash_between_a_failure_and_its_record_may_cost_one_request() -> None:
    obs = down_builder(lose_record=True).build()
    assert sum(1 for r in obs.requests if retryable(r)) == 5  # max_retries + 1, plus the lost one
    assert check(obs, failing_scenario()) == []


def test_attempts_that_restart_after_a_crash() -> None:
    violations = check(down_builder(reset=True).build(), failing_scenario())
    assert ids(violations) == {BOUND}
    store, requests = violations
    assert store.message == ("retry_pending at commit 5 records attempt 1, after attempt 2 at "
                             "commit 3 with no message in between; the attempts of one step count "
                             "up by one (3 expected), across crashes too")
    assert requests.evidence == {"requests": [0, 1, 2, 3, 4, 5], "max_retries": 3,
                                 "lost_records": 1, "allowed": 5, "history_messages": 1}


def test_without_a_store_restarted_attempts_are_still_retry_bound() -> None:
    assert without_store(down_builder(reset=True).build(), failing_scenario()) == [BOUND]


def test_retries_past_max_retries() -> None:
    # One retry too many is seen in the store; the requests allow one more for the crash.
    violations = check(down_builder(extra=1).build(), failing_scenario())
    assert [v.message for v in violations] == [
        "retry_pending at commit 6 records attempt 4, past max_retries 3; the run must end failed "
        "instead"]
    violations = check(down_builder(extra=2).build(), failing_scenario())
    assert ids(violations) == {BOUND}
    assert len(violations) == 2, "one per step from the store, one from the requests"
    assert "so at most 5;" in violations[1].message


def test_the_limit_is_the_scenarios() -> None:
    # The same retries are too many for an agent told max_retries = 1.
    assert ids(check(down_builder().build(), failing_scenario(max_retries=1))) == {BOUND}


def test_a_committed_message_begins_a_new_step() -> None:
    b = ObservationBuilder()
    run_id = b.start()
    b.retry(run_id, 1)
    b.retry(run_id, 2)
    b.turn(run_id, APPEND)
    b.retry(run_id, 1)  # a new step counts from 1 again
    b.turn(run_id, BASH)
    b.ask(run_id, text=ANSWER)
    b.exit(0)
    b.settle()
    # Two retries per step are within max_retries 2, though the run retried three times in all.
    assert check(b.build(), msgspec.structs.replace(changelog_scenario(),
                                                     agent=AgentSettings(max_retries=2))) == []
