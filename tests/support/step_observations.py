"""Observations for the ends of a step: a final answer that must end its run chain, and retries
that must stay counted across crashes (final-ends-run, retry-bound). Built with
tests.support.observations, in the order agent/loop.py acts."""

from __future__ import annotations

import msgspec

from crashmatrix.agent import records as R
from crashmatrix.agent.records import Intent, Outcome, Role
from crashmatrix.agent.recovery import RecoveryBranch as B
from crashmatrix.harness.records.observation import Observation
from crashmatrix.scenarios.model import AgentSettings, Expect, Scenario
from crashmatrix.scenarios.model import Outcome as Expected
from tests.support.observations import (
    ANSWER,
    APPEND,
    BASH,
    ObservationBuilder,
    changelog_scenario,
)

INPUT = "also mention the ticket"


def answered_builder(*, ask_again: bool = True, with_answer: bool = True) -> ObservationBuilder:
    """The tests ran; the final answer is committed on its own (without run_finished) and the
    agent is killed right after. Its recovery (ask_again) continues the run and asks the model
    again, sending the final answer in the history (with_answer) or the history before it."""
    b = ObservationBuilder()
    run_id = b.start()
    b.turn(run_id, APPEND)
    b.turn(run_id, BASH)
    b.poll()
    b.request(reply={"role": "assistant", "content": ANSWER, "tool_calls": None})
    b.commit([R.message(b.msg_id(), run_id, Role.ASSISTANT, ANSWER)])
    b.kill()
    if not ask_again:
        return b
    b.incarnation()
    b.branch(B.CONTINUE_AFTER_TOOL_RESULT)
    new = b.resume(run_id, [], attempt=1)
    b.poll()
    sent = b.wire() if with_answer else b.wire()[:-1]
    b.request(messages=sent, reply={"role": "assistant", "content": ANSWER, "tool_calls": None})
    b.commit([R.message(b.msg_id(), new, Role.ASSISTANT, ANSWER),
              R.run_finished(new, Outcome.COMPLETED)])
    b.exit(0)
    b.settle()
    return b


def next_prompt_builder() -> ObservationBuilder:
    """Correct: the run completes with its answer; an input that arrived meanwhile starts a new
    prompt run, whose request carries the new user message after the answer."""
    b = ObservationBuilder()
    run_id = b.start()
    b.turn(run_id, APPEND)
    b.turn(run_id, BASH)
    b.ask(run_id, text=ANSWER)
    b.deliver("input", "in-1", INPUT)
    b.take_input(("in-1", INPUT))
    new, msg_id = f"run-{b.next_seq}", b.msg_id()
    b.commit([R.run_started(new, Intent.PROMPT), R.message(msg_id, new, Role.USER, INPUT),
              R.input_consumed("in-1", msg_id)])
    b.ask(new, text=ANSWER)
    b.exit(0)
    b.settle()
    return b


def asked_after_final() -> tuple[Observation, Scenario]:
    return answered_builder().build(), changelog_scenario()


def failing_scenario(max_retries: int = 3) -> Scenario:
    """The changelog scenario against a provider that stays down: the run must end failed."""
    s = changelog_scenario(Expect(outcome=(Expected.FAILED,)))
    return msgspec.structs.replace(s, agent=AgentSettings(max_retries=max_retries))


def give_up(b: ObservationBuilder, run_id: str) -> None:
    """One more retryable failure with no attempts left: the run ends failed."""
    b.poll()
    b.request(500, "http_500")
    b.commit([R.run_finished(run_id, Outcome.FAILED, "provider: HTTP 500")])


def down_builder(*, reset: bool = False, lose_record: bool = False,
                 extra: int = 0) -> ObservationBuilder:
    """Every request fails with a 500 (max_retries 3). Incarnation 1 records attempts 1 and 2
    and is killed after the second record, or (lose_record) after its third failure, before
    that one was recorded. The recovery goes on counting (or, reset, starts again at 1), and
    gives up once attempt 3 is spent; `extra` retries past the limit are recorded first."""
    b = ObservationBuilder()
    run_id = b.start()
    b.retry(run_id, 1)
    b.retry(run_id, 2)
    if lose_record:
        b.poll()
        b.request(500, "http_500")
    b.kill()
    b.incarnation()
    b.branch(B.CONTINUE_RETRY_PENDING)
    new = b.resume(run_id, [], attempt=1)
    for attempt in (range(1, 4) if reset else range(3, 4 + extra)):
        b.retry(new, attempt)
    give_up(b, new)
    b.exit(1)
    b.settle()
    return b


def retries_restarted() -> tuple[Observation, Scenario]:
    return down_builder(reset=True).build(), failing_scenario()

