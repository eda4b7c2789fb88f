"""Verifier: the run lifecycle invariants (finish, budget, inbox, retries, liveness, oracle)."""

from __future__ import annotations

import pytest

from crashmatrix.agent import records as R
from crashmatrix.agent.records import Outcome
from crashmatrix.agent.recovery import RecoveryBranch as B
from crashmatrix.harness.records.transcript import Record, Run
from crashmatrix.harness.verify import InvariantId
from crashmatrix.scenarios.model import Boundary, BoundaryKind, Expect, LineRule, Scenario
from crashmatrix.scenarios.model import Outcome as Expected
from tests.support.observations import (
    ANSWER,
    APPEND,
    BASH,
    CHANGELOG,
    LINE,
    READ,
    ObservationBuilder,
    changelog_baseline,
    changelog_builder,
    changelog_scenario,
    check,
    crashed_at_append,
    finish,
    ids,
    recover_unknown,
)

Id = InvariantId
K = BoundaryKind


def expecting(*outcomes: Expected) -> Scenario:
    return changelog_scenario(Expect(outcome=outcomes))


# -- flows, each one step away from the baseline ---------------------------------------------
def retry_builder(*, record: bool = True) -> ObservationBuilder:
    """After recovery, the first request fails with HTTP 500 and is retried."""
    b = ObservationBuilder()
    first, _, result_id = crashed_at_append(b)
    run_id = recover_unknown(b, first, result_id)
    if record:
        b.retry(run_id)
    else:
        b.poll()
        b.request(500, "http_500")
    finish(b, run_id)
    return b


def owed_retry_builder(*, retry: bool = True) -> ObservationBuilder:
    """Killed right after committing retry_pending; the next incarnation owes the retry."""
    b = ObservationBuilder()
    first, _, result_id = crashed_at_append(b)
    run_id = recover_unknown(b, first, result_id)
    b.retry(run_id)
    b.kill()
    b.incarnation()
    if retry:
        b.branch(B.CONTINUE_RETRY_PENDING)
        finish(b, b.resume(run_id, [], attempt=2))
    else:
        b.commit([R.run_finished(run_id, Outcome.ABORTED, "gave up")])
        b.exit(1)
        b.settle()
    return b


def budget_builder(*, notice: bool = True) -> ObservationBuilder:
    """Budget 1: killed again at the bash effect, so the third incarnation closes the run."""
    b = ObservationBuilder(resume_budget=1)
    first, _, result_id = crashed_at_append(b)
    run_id = recover_unknown(b, first, result_id)
    b.turn(run_id, READ)
    assistant_id = b.ask(run_id, BASH)
    bash_result = b.started(run_id, assistant_id, BASH)
    b.effect(BASH)
    b.kill()
    b.incarnation()
    b.branch(B.CALL_UNKNOWN_RECORDED_NEVER)
    b.branch(B.CLOSE_BUDGET_EXHAUSTED)
    text = f"run {run_id} was interrupted again; the resume budget (1) is used up"
    b.commit([b.unknown(run_id, bash_result, BASH),
              *([R.notice(run_id, text)] if notice else []),
              R.run_finished(run_id, Outcome.ABORTED, "resume budget 1 exhausted")])
    b.exit(1)
    b.settle()
    return b


NOTE = "also mention the ticket number"


def input_builder(*, consume: bool = True) -> ObservationBuilder:
    """An input arrives while the model is asked for the bash call; it is taken in at the next
    poll, becomes a user message, and the model answers with it in view."""
    b = ObservationBuilder()
    first, _, result_id = crashed_at_append(b)
    run_id = recover_unknown(b, first, result_id)
    b.turn(run_id, READ)
    b.poll()
    b.deliver("input", "in-1", NOTE)
    assistant_id = b.reply(run_id, BASH)
    b.call(run_id, assistant_id, BASH)
    b.poll(items=1)
    b.take_input(("in-1", NOTE))
    if consume:
        b.consume(run_id, ("in-1", NOTE))
    b.reply(run_id, text=ANSWER)
    b.exit(0)
    b.settle()
    return b


def cancel_builder(*, honour: bool = True) -> ObservationBuilder:
    """A cancel arrives while the model is asked for the bash call; the next poll closes the run."""
    b = ObservationBuilder()
    first, _, result_id = crashed_at_append(b)
    run_id = recover_unknown(b, first, result_id)
    b.turn(run_id, READ)
    b.poll()
    b.deliver("cancel", "cancel-1")
    assistant_id = b.reply(run_id, BASH)
    b.call(run_id, assistant_id, BASH)
    if honour:
        b.poll(items=1)
        finished = R.run_finished(run_id, Outcome.CANCELLED, "cancel requested")
        finished["cancel_id"] = "cancel-1"
        b.commit([finished])
    else:
        b.ask(run_id, text=ANSWER)
    b.exit(0)
    b.settle()
    return b


# -- finished-stays-finished -----------------------------------------------------------------
def test_settle_incarnation_that_talks_to_the_provider() -> None:
    b = changelog_builder()
    b.incarnations.pop()  # replace the quiet settle with a chatty one
    b.incarnation()
    b.branch(B.NO_OPEN_RUN)
    b.poll()
    b.request()
    b.exit(0)
    violations = check(b.build())
    # The request also comes after the completed run's final answer, in its run chain.
    assert ids(violations) == {Id.FINISHED_STAYS_FINISHED, Id.FINAL_ENDS_RUN}
    assert violations[0].evidence["requests"] == [4]
    assert "inc3 started with the session's last run run-4 already completed" in violations[0].message


def test_resuming_a_completed_run() -> None:
    obs = changelog_baseline()
    obs.transcript.runs.append(Run("run-12", 12, "resume", "run-4", 2, "aborted", "interrupted", 12))
    violations = check(obs)
    # The oracle rightly sees the session end with the aborted run-12.
    assert ids(violations) == {Id.FINISHED_STAYS_FINISHED, Id.SCENARIO_ORACLE}
    assert "resumes run run-4, which finished completed at commit 11" in violations[0].message


# -- resume-budget ---------------------------------------------------------------------------
def test_budget_close_with_notice_holds() -> None:
    assert check(budget_builder().build(), expecting(Expected.ABORTED)) == []


def test_budget_close_without_notice() -> None:
    violations = check(budget_builder(notice=False).build(), expecting(Expected.ABORTED))
    assert ids(violations) == {Id.RESUME_BUDGET}
    assert "without a visible notice" in violations[0].message


def test_request_after_budget_close() -> None:
    b = budget_builder()
    b.incarnations.pop()
    b.incarnation()
    b.branch(B.NO_OPEN_RUN)
    b.poll()
    b.request()
    b.exit(0)
    violations = check(b.build(), expecting(Expected.ABORTED))
    assert ids(violations) == {Id.RESUME_BUDGET}
    assert "inc4#3 provider.before:chat" in violations[0].message


def test_resume_attempt_must_count_up_by_one() -> None:
    obs = changelog_baseline()
    runs = obs.transcript.runs
    runs[1] = Run("run-4", 4, "resume", "run-1", 2, "completed", None, 11)
    violations = check(obs)
    assert ids(violations) == {Id.RESUME_BUDGET}
    assert "as attempt 2, but run-1 was attempt 0" in violations[0].message


# -- queued-input ----------------------------------------------------------------------------
def test_input_taken_in_and_used_once_holds() -> None:
    assert check(input_builder().build()) == []


def test_input_queued_but_never_consumed() -> None:
    violations = check(input_builder(consume=False).build())
    assert ids(violations) == {Id.QUEUED_INPUT}
    assert "queued but never consumed" in violations[0].message


def test_input_consumed_twice_and_queued_with_other_text() -> None:
    obs = input_builder().build()
    records = obs.transcript.records
    consumed = next(r for r in records if r.kind == "input_consumed")
    records.append(Record(consumed.seq + 100, "input_consumed", dict(consumed.data)))
    queued = next(r for r in records if r.kind == "input_queued")
    records[records.index(queued)] = Record(queued.seq, "input_queued", {**queued.data, "text": "x"})
    messages = [v.message for v in check(obs)]
    assert any("was consumed 2 times" in m for m in messages)
    assert any("with text 'x'" in m for m in messages)


def test_cancel_closes_the_open_run() -> None:
    assert check(cancel_builder().build(), expecting(Expected.CANCELLED)) == []


def test_ignored_cancel() -> None:
    violations = check(cancel_builder(honour=False).build(), expecting(Expected.CANCELLED))
    assert ids(violations) == {Id.QUEUED_INPUT, Id.SCENARIO_ORACLE}
    (v,) = [v for v in violations if v.invariant is Id.QUEUED_INPUT]
    assert "cancel cancel-1" in v.message
    assert "run run-4 ended completed" in v.message


def cancel_seen(b: ObservationBuilder) -> tuple[str, str]:
    """A cancel lands, the next poll can see it, and the model is asked for the bash call
    anyway. Returns (run id, assistant id)."""
    first, _, result_id = crashed_at_append(b)
    run_id = recover_unknown(b, first, result_id)
    b.turn(run_id, READ)
    b.deliver("cancel", "cancel-1")
    b.poll(items=1)
    return run_id, b.reply(run_id, BASH)


def close_cancelled(b: ObservationBuilder, run_id: str) -> None:
    """The run closed cancelled for cancel-1, the incarnation ends and the settle finds nothing."""
    finished = R.run_finished(run_id, Outcome.CANCELLED, "cancel requested")
    finished["cancel_id"] = "cancel-1"
    b.commit([finished])
    b.exit(0)
    b.settle()


def test_a_tool_begun_after_the_poll_that_found_the_cancel() -> None:
    """The run closes cancelled, but only after a tool it began once its poll had found the
    cancel (as the mutant cancel-after-first-reply does)."""
    b = ObservationBuilder()
    run_id, assistant_id = cancel_seen(b)
    b.call(run_id, assistant_id, BASH)
    b.poll(items=1)
    close_cancelled(b, run_id)
    violations = check(b.build(), expecting(Expected.CANCELLED))
    assert ids(violations) == {Id.QUEUED_INPUT}
    (v,) = violations
    assert "tool bash began at inc2#" in v.message
    assert "after the inbox poll at inc2#" in v.message
    assert v.evidence["cancel_id"] == "cancel-1"


@pytest.mark.parametrize("began", [False, True])
def test_a_tool_killed_at_its_effect_before_never_began_after_the_cancel(began: bool) -> None:
    """The poll that could see the cancel is followed by a tool's effect.before. Killed there, the
    tool never ran: no violation (the recovery closes the run cancelled). Past it, the tool ran
    with the cancel in sight: a violation."""
    b = ObservationBuilder()
    run_id, assistant_id = cancel_seen(b)
    b.started(run_id, assistant_id, BASH)
    b.effect(BASH, upto=K.EFFECT_AFTER if began else K.EFFECT_BEFORE)
    b.kill()
    b.incarnation()
    close_cancelled(b, run_id)
    found = [v for v in check(b.build(), expecting(Expected.CANCELLED)) if v.invariant is Id.QUEUED_INPUT]
    if began:
        (v,) = found
        assert "tool bash began at inc2#" in v.message
    else:
        assert found == []


# -- retry-intent ----------------------------------------------------------------------------
def test_recorded_retry_holds() -> None:
    assert check(retry_builder().build()) == []


def test_retry_without_retry_pending() -> None:
    violations = check(retry_builder(record=False).build())
    assert ids(violations) == {Id.RETRY_INTENT}
    assert "inc2#8 provider.after:error was followed by inc2#10 provider.before:chat" in violations[0].message


def test_owed_retry_is_made_after_a_crash() -> None:
    assert check(owed_retry_builder().build()) == []


def test_owed_retry_dropped_by_recovery() -> None:
    violations = check(owed_retry_builder(retry=False).build())
    assert ids(violations) == {Id.RETRY_INTENT, Id.SCENARIO_ORACLE}
    (v,) = [v for v in violations if v.invariant is Id.RETRY_INTENT]
    assert "retry_pending (attempt 1, commit 5) was unresolved when inc3 started" in v.message


# -- liveness --------------------------------------------------------------------------------
def test_crash_exit_code_and_harness_error() -> None:
    obs = changelog_baseline()
    obs.incarnations[-1].exit_code = 3
    obs.harness_error = "OSError: no space left on device"
    violations = check(obs)
    assert ids(violations) == {Id.LIVENESS}
    assert len(violations) == 2


def test_run_left_open_by_a_clean_exit() -> None:
    b = ObservationBuilder()
    run_id, _, result_id = crashed_at_append(b)
    resumed = recover_unknown(b, run_id, result_id)
    b.turn(resumed, READ)
    b.exit(0)
    violations = check(b.build())
    assert ids(violations) == {Id.LIVENESS, Id.SCENARIO_ORACLE}


# -- scenario-oracle -------------------------------------------------------------------------
def test_final_answer_and_files() -> None:
    scenario = changelog_scenario(Expect(final_answer_contains=("2 passed",),
                                         files={CHANGELOG: "# Changelog\n"}))
    messages = [v.message for v in check(changelog_baseline(), scenario)]
    assert len(messages) == 2
    assert "does not contain '2 passed'" in messages[0]
    assert messages[1] == "CHANGELOG.md differs from the expected content (2 lines, expected 1)"


def test_exact_files_and_lines_hold() -> None:
    scenario = changelog_scenario(Expect(files={CHANGELOG: f"# Changelog\n{LINE}\n"},
                                         lines=(LineRule(CHANGELOG, LINE, min=1, max=1),)))
    assert check(changelog_baseline(), scenario) == []


def test_missing_line_after_the_boundary_was_reached() -> None:
    obs = changelog_baseline()
    obs.workspace_after[CHANGELOG] = "# Changelog\n"
    violations = check(obs)
    assert ids(violations) == {Id.SCENARIO_ORACLE}
    assert violations[0].evidence["boundary_reached"] is True


def test_missing_line_is_accepted_when_the_crash_came_before_the_boundary() -> None:
    """Killed before effect.before:append_note; the model gives up on the line and answers."""
    b = ObservationBuilder()
    run_id = b.start()
    assistant_id = b.ask(run_id, APPEND)
    result_id = b.started(run_id, assistant_id, APPEND)
    b.kill()
    resumed = recover_unknown(b, run_id, result_id)
    b.turn(resumed, BASH)
    b.ask(resumed, text=ANSWER)
    b.exit(0)
    b.settle()
    rule = LineRule(CHANGELOG, LINE, min=1, max=1,
                    missing_ok_if_crash_before=Boundary(K.EFFECT_BEFORE, "append_note"))
    assert check(b.build(), changelog_scenario(Expect(lines=(rule,)))) == []


