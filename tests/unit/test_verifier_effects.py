"""Verifier: the store, pairing, effects and history invariants, each on a built case."""

from __future__ import annotations

import dataclasses

from crashmatrix.agent import records as R
from crashmatrix.agent.records import Intent, Outcome, Recovered, Role
from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.transcript import Message, Run
from crashmatrix.harness.verify import InvariantId, Violation
from crashmatrix.scenarios.model import BoundaryKind
from tests.support.observations import (
    ANSWER,
    APPEND,
    BASH,
    CHANGELOG,
    LINE,
    READ,
    TASK,
    ObservationBuilder,
    call,
    changelog_baseline,
    check,
    crashed_at_append,
    finish,
    ids,
    lying_success_builder,
    recover_unknown,
    rerun_builder,
    reused_call_ids_builder,
)

Id = InvariantId
K = BoundaryKind


def of(violations: list[Violation], invariant: InvariantId) -> list[Violation]:
    return [v for v in violations if v.invariant is invariant]


# -- log-integrity ---------------------------------------------------------------------------
def test_torn_tail_after_a_clean_end_is_reported() -> None:
    obs = changelog_baseline()
    obs.transcript.torn_tail = "line 12: incomplete last line (torn write)"
    violations = check(obs)
    assert ids(violations) == {Id.LOG_INTEGRITY}
    assert "line 12" in violations[0].message


def test_torn_tail_is_legal_when_the_last_incarnation_was_killed() -> None:
    b = ObservationBuilder()
    crashed_at_append(b)
    obs = b.build()
    obs.transcript.torn_tail = "line 4: incomplete last line (torn write)"
    assert Id.LOG_INTEGRITY not in ids(check(obs))


def test_two_open_runs_at_the_end() -> None:
    obs = changelog_baseline()
    obs.transcript.runs += [Run("run-12", 12, "prompt"), Run("run-13", 13, "prompt")]
    violations = check(obs)
    assert ids(violations) == {Id.LOG_INTEGRITY, Id.LIVENESS, Id.SCENARIO_ORACLE}
    assert "2 runs are open at the end (run-12, run-13)" in of(violations, Id.LOG_INTEGRITY)[0].message


def test_message_committed_to_a_finished_run() -> None:
    obs = changelog_baseline()
    obs.transcript.messages.append(Message(12, "m12.0", "run-1", "assistant", ANSWER))
    violations = check(obs)
    assert ids(violations) == {Id.LOG_INTEGRITY}
    assert "finished (aborted) at commit 4" in violations[0].message


# -- pairing ---------------------------------------------------------------------------------
def test_missing_result_and_the_providers_400() -> None:
    """Recovery resumes without resolving call_1; the fake refuses the history with a 400."""
    b = ObservationBuilder()
    run_id, _, _ = crashed_at_append(b)
    b.incarnation()
    b.branch("continue.after_tool_result")
    resumed = b.resume(run_id, [], attempt=1)
    b.poll()
    b.request(400, None)
    b.commit([R.run_finished(resumed, Outcome.FAILED, "provider: HTTP 400")])
    b.exit(1)
    b.settle()
    violations = check(b.build())
    assert ids(violations) == {Id.PAIRING, Id.SCENARIO_ORACLE}
    messages = [v.message for v in of(violations, Id.PAIRING)]
    assert any("call call_1 (append_note)" in m and "no result" in m for m in messages)
    assert any("request #1" in m and "HTTP 400" in m for m in messages)


def test_orphan_result() -> None:
    obs = changelog_baseline()
    messages = obs.transcript.messages
    read_result = next(m for m in messages if m.call_id == "call_2")
    orphan = dataclasses.replace(read_result, msg_id="m99.0", call_id="call_9")
    messages.insert(messages.index(read_result) + 1, orphan)
    violations = of(check(obs), Id.PAIRING)
    assert len(violations) == 1
    assert "call_9" in violations[0].message
    assert "orphan" in violations[0].message


def test_reused_call_ids_pair_within_their_own_window() -> None:
    """A provider that names every call `call_1`: pairing and effects stay per turn."""
    assert check(reused_call_ids_builder().build()) == []


# -- at-most-once ----------------------------------------------------------------------------
def test_lying_probes_cannot_hide_a_second_append() -> None:
    """No second effect event anywhere, but CHANGELOG has the line twice: ground truth wins."""
    obs = changelog_baseline()
    obs.workspace_after[CHANGELOG] += LINE + "\n"
    violations = check(obs)
    assert ids(violations) == {Id.AT_MOST_ONCE, Id.SCENARIO_ORACLE}
    (v,) = of(violations, Id.AT_MOST_ONCE)
    assert v.message.startswith("call call_1 (append_note) took effect 2 times")
    assert v.evidence["file_lines"] == [2, 3]
    assert v.evidence["call_ids"] == ["call_1"]


def test_a_reissued_call_is_a_new_call() -> None:
    """Killed before the effect; the model reads, finds no line, and appends again as call_4."""
    b = ObservationBuilder()
    run_id = b.start()
    assistant_id = b.ask(run_id, APPEND)
    result_id = b.started(run_id, assistant_id, APPEND)
    b.effect(APPEND, upto=K.EFFECT_BEFORE)
    b.kill()
    resumed = recover_unknown(b, run_id, result_id)
    b.turn(resumed, READ)
    b.turn(resumed, call("call_4", "append_note", path=CHANGELOG, line=LINE))
    b.turn(resumed, BASH)
    b.ask(resumed, text=ANSWER)
    b.exit(0)
    b.settle()
    obs = b.build()
    assert check(obs) == []
    # Two distinct calls may leave two lines: at-most-once holds, the scenario's own rule does not.
    obs.workspace_after[CHANGELOG] += LINE + "\n"
    assert ids(check(obs)) == {Id.SCENARIO_ORACLE}


def test_trace_shows_a_never_call_run_twice() -> None:
    """The workspace cannot show it (the second run left no mark), the trace can."""
    obs = changelog_baseline()
    inc2 = obs.incarnations[1]
    n = len(inc2.events)
    inc2.events += [ProbeEvent(n + 1, "effect.before", "append_note", {"call_id": "call_1"}),
                    ProbeEvent(n + 2, "effect.after", "append_note", {"call_id": "call_1"})]
    violations = check(obs)
    assert ids(violations) == {Id.AT_MOST_ONCE, Id.SAFE_RERUN}
    (v,) = of(violations, Id.AT_MOST_ONCE)
    assert "inc1#14 effect.before:append_note" in v.message
    assert f"inc2#{n + 1} effect.before:append_note" in v.message


# -- no-silent-success -----------------------------------------------------------------------
def _recovered_with(content: str, *, is_error: bool) -> Observation:
    b = ObservationBuilder()
    run_id, _, result_id = crashed_at_append(b)
    b.incarnation()
    b.branch("call.unknown_recorded_never")
    b.branch("continue.after_tool_result")
    repair = b.result_entry(run_id, result_id, APPEND, content, is_error=is_error,
                            recovered=Recovered.UNKNOWN)
    finish(b, b.resume(run_id, [repair], attempt=1))
    return b.build()


def test_unknown_result_must_say_so_and_be_an_error() -> None:
    vague = check(_recovered_with("ERROR: interrupted", is_error=True))
    assert ids(vague) == {Id.NO_SILENT_SUCCESS}
    assert "does not say 'outcome is unknown'" in vague[0].message
    claimed = check(_recovered_with(R.UNKNOWN_OUTCOME_TEXT, is_error=False))
    assert ids(claimed) == {Id.NO_SILENT_SUCCESS}
    assert any("is not marked as an error" in v.message for v in claimed)


def test_success_written_by_recovery_without_rerun() -> None:
    violations = check(lying_success_builder().build())
    assert ids(violations) == {Id.NO_SILENT_SUCCESS}
    (v,) = violations
    assert "call call_1 (append_note) at commit 4 reports success" in v.message
    assert "inc2, which committed it" in v.message
    assert v.evidence["effects"] == ["inc1#14", "inc1#15"]


# -- safe-rerun ------------------------------------------------------------------------------
def test_rerun_of_a_never_call() -> None:
    violations = check(rerun_builder().build())
    assert ids(violations) == {Id.SAFE_RERUN}
    assert "replay=never" in violations[0].message
    assert "inc2 registered append_note=never" in violations[0].message


def test_rerun_of_a_safe_read_holds_wherever_it_was_killed() -> None:
    for kill_at in (K.COMMIT_AFTER, K.EFFECT_BEFORE, K.EFFECT_AFTER):
        assert check(rerun_builder(READ, kill_at=kill_at).build()) == [], kill_at


def test_rerun_after_the_policy_became_never() -> None:
    policies = {"read": "never", "append_note": "never", "bash": "never"}
    violations = check(rerun_builder(READ, kill_at=K.EFFECT_AFTER, policies=policies).build())
    assert ids(violations) == {Id.SAFE_RERUN}
    assert "inc3 registered read=never" in violations[0].message
    assert violations[0].evidence["events"] == ["inc3#3", "inc3#4"]


# -- continuation ----------------------------------------------------------------------------
def _resumed_with_user_message(text: str) -> Observation:
    b = ObservationBuilder()
    run_id, _, result_id = crashed_at_append(b)
    b.incarnation()
    b.branch("continue.after_tool_result")
    resumed = f"run-{b.next_seq}"
    b.commit([b.unknown(run_id, result_id, APPEND),
              R.run_finished(run_id, Outcome.ABORTED, "interrupted"),
              R.run_started(resumed, Intent.RESUME, run_id, 1),
              R.message(b.msg_id(), resumed, Role.USER, text)])
    finish(b, resumed)
    return b.build()


def test_resent_task() -> None:
    violations = check(_resumed_with_user_message(TASK))
    assert ids(violations) == {Id.CONTINUATION}
    assert "request #1 carries the task 2 times" in violations[0].message


def test_bare_continue() -> None:
    violations = check(_resumed_with_user_message("continue"))
    assert ids(violations) == {Id.CONTINUATION}
    assert "'continue'" in violations[0].message


def test_request_that_is_not_the_committed_history() -> None:
    obs = changelog_baseline()
    sent = obs.requests[1]
    told = [*sent.messages[:-1], {**sent.messages[-1], "content": "appended 1 line to CHANGELOG.md"}]
    obs.requests[1] = dataclasses.replace(sent, messages=told)
    violations = check(obs)
    assert ids(violations) == {Id.CONTINUATION}
    assert violations[0].evidence["request"] == 1
    assert violations[0].evidence["position"] == 2



def _saved_after_the_effect(*, restart_between: bool) -> Observation:
    """The model asks for append_note; the agent runs it, then saves the call and its result in
    one commit (the OpenAI Agents SDK's session does). With `restart_between`, the run is killed
    after the effect and a new incarnation saves the call with a success it never ran."""
    b = ObservationBuilder()
    run_id = b.start()
    b.poll()
    b.request(tool_calls=1, reply={"role": "assistant", "content": None, "tool_calls": [APPEND]})
    content, _ = b.effect(APPEND)
    if restart_between:
        b.kill()
        b.incarnation()
    assistant = R.message(b.msg_id(), run_id, Role.ASSISTANT, None, tool_calls=[APPEND])
    b.commit([assistant, b.result_entry(run_id, b.msg_id(), APPEND, content)])
    return b.build()


def test_an_effect_saved_with_its_call_afterwards_backs_that_calls_result() -> None:
    assert InvariantId.NO_SILENT_SUCCESS not in ids(check(_saved_after_the_effect(restart_between=False)))
    # Saved by another incarnation, which never ran it: a success without evidence.
    assert InvariantId.NO_SILENT_SUCCESS in ids(check(_saved_after_the_effect(restart_between=True)))


def test_a_reused_call_id_saved_after_each_effect_charges_each_effect_to_its_own_turn() -> None:
    """Two turns with the same call id, each call saved with its result after the tool ran: the
    second effect belongs to the second turn (the first was answered), not to a re-run."""
    b = ObservationBuilder()
    run_id = b.start()
    for _ in range(2):
        b.poll()
        b.request(tool_calls=1, reply={"role": "assistant", "content": None, "tool_calls": [APPEND]})
        content, _ = b.effect(APPEND)
        assistant = R.message(b.msg_id(), run_id, Role.ASSISTANT, None, tool_calls=[APPEND])
        b.commit([assistant, b.result_entry(run_id, b.msg_id(), APPEND, content)])
    found = ids(check(b.build()))
    assert Id.AT_MOST_ONCE not in found
    assert Id.NO_SILENT_SUCCESS not in found
