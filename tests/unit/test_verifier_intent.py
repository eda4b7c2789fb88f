"""Verifier: intent-before-effect, reserved-result and durable-commits, each on a built case."""

from __future__ import annotations

import dataclasses
import json

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.verify import InvariantId, Violation
from crashmatrix.scenarios.model import BoundaryKind
from tests.support.observations import (
    APPEND,
    READ,
    B,
    ObservationBuilder,
    changelog_baseline,
    changelog_builder,
    check,
    crashed_at_append,
    finish,
    ids,
    late_intent_builder,
    lost_intent_builder,
    recover_unknown,
    rerun_builder,
    torn_result_builder,
)

Id = InvariantId
K = BoundaryKind
MINE = {Id.INTENT_BEFORE_EFFECT, Id.RESERVED_RESULT, Id.DURABLE_COMMITS}


def of(violations: list[Violation], invariant: InvariantId) -> list[Violation]:
    return [v for v in violations if v.invariant is invariant]


def test_the_correct_agent_holds_all_three_wherever_it_was_killed() -> None:
    assert check(changelog_baseline()) == []
    for kill_at in (K.COMMIT_AFTER, K.EFFECT_BEFORE, K.EFFECT_AFTER):
        assert check(rerun_builder(READ, kill_at=kill_at).build()) == [], kill_at


# -- intent-before-effect ----------------------------------------------------------------------
def test_an_intent_committed_after_the_effect_is_caught() -> None:
    violations = check(late_intent_builder().build())
    assert ids(violations) == {Id.INTENT_BEFORE_EFFECT}
    (v,) = violations
    assert v.message.startswith("call call_1 (append_note) took effect (inc1#11 "
                                "effect.before:append_note) but its tool_started (commit 3) landed "
                                "only later, at inc1#14 commit.written:tool_started.append_note")
    assert v.evidence["effects"] == ["inc1#11"]
    assert v.evidence["start_landed"] == "inc1#14"


def _without_intent() -> Observation:
    """Crash-free; append_note runs and its result is saved, but no tool_started ever is."""
    b = ObservationBuilder()
    run_id = b.start()
    b.ask(run_id, APPEND)
    result_id = b.msg_id()
    content, is_error = b.effect(APPEND)
    b.result(run_id, result_id, APPEND, content, is_error=is_error)
    finish(b, run_id)
    return b.build()


def test_an_effect_with_no_intent_at_all_is_caught() -> None:
    violations = check(_without_intent())
    assert ids(violations) == {Id.INTENT_BEFORE_EFFECT}
    assert "no tool_started for it was ever committed" in violations[0].message


def test_a_recovery_rerun_needs_the_intent_too() -> None:
    obs = rerun_builder(READ, kill_at=K.EFFECT_AFTER).build()
    start = next(s for s in obs.transcript.starts if s.call_id == READ["id"])
    obs.transcript.starts.remove(start)
    (v,) = of(check(obs), Id.INTENT_BEFORE_EFFECT)
    assert v.evidence["recovery"] == [False, True], "the first attempt and the re-run"


def test_an_intent_of_another_run_chain_does_not_count() -> None:
    obs = changelog_baseline()
    start = next(s for s in obs.transcript.starts if s.call_id == APPEND["id"])
    obs.transcript.starts[obs.transcript.starts.index(start)] = dataclasses.replace(
        start, run_id="run-99")
    obs.transcript.runs.append(dataclasses.replace(obs.transcript.runs[0], run_id="run-99", seq=99))
    (v,) = of(check(obs), Id.INTENT_BEFORE_EFFECT)
    assert "outside the run chain of the call" in v.message


def test_an_effect_killed_at_its_probe_never_began() -> None:
    b = ObservationBuilder()
    run_id = b.start()
    b.ask(run_id, APPEND)
    b.effect(APPEND, upto=K.EFFECT_BEFORE)  # without its intent, but the tool never ran
    b.kill()
    assert Id.INTENT_BEFORE_EFFECT not in ids(check(b.build()))


# -- reserved-result ---------------------------------------------------------------------------
def _renamed(obs: Observation, call_id: str, new_id: str, recovered: str | None) -> Observation:
    messages = obs.transcript.messages
    k = next(k for k, m in enumerate(messages)
             if m.call_id == call_id and m.recovered == recovered)
    messages[k] = dataclasses.replace(messages[k], msg_id=new_id)
    return obs


def test_an_unknown_outcome_under_a_fresh_id_is_caught() -> None:
    b = ObservationBuilder()
    run_id, _, _ = crashed_at_append(b)
    finish(b, recover_unknown(b, run_id, "m4.c-call_1"))
    violations = check(b.build())
    assert ids(violations) == {Id.RESERVED_RESULT}
    assert violations[0].message == (
        "the unknown-outcome result of call call_1 (append_note) at commit 4 was stored as "
        "m4.c-call_1, but its tool_started (commit 3) reserved m3.0; a call's result must take "
        "the id its intent reserved")


def test_a_rerun_result_under_a_fresh_id_is_caught() -> None:
    obs = _renamed(rerun_builder(READ).build(), READ["id"], "m9.c-call_2", "rerun")
    violations = check(obs)
    assert ids(violations) == {Id.RESERVED_RESULT}
    assert "the recovery re-run result of call call_2 (read)" in violations[0].message


def test_a_normal_result_under_a_fresh_id_is_caught() -> None:
    obs = _renamed(changelog_baseline(), "call_3", "m42.7", None)
    violations = check(obs)
    assert ids(violations) == {Id.RESERVED_RESULT}
    assert violations[0].message.startswith("the result of call call_3 (bash)")
    assert violations[0].evidence["reserved"] != "m42.7"


def test_a_call_without_intent_has_no_reserved_id_to_keep() -> None:
    # No tool_started: the result id is the agent's own business (intent-before-effect aside).
    assert of(check(_without_intent()), Id.RESERVED_RESULT) == []


# -- durable-commits ---------------------------------------------------------------------------
def test_an_acknowledged_commit_dropped_by_the_repair_is_caught() -> None:
    violations = check(lost_intent_builder().build())
    # The effect did follow its intent: the loss is durable-commits' alone to report.
    assert ids(violations) == {Id.DURABLE_COMMITS}
    (v,) = violations
    assert v.message == (
        "commit 3 (tool_started.append_note) was acknowledged at inc1#13 "
        "commit.after:tool_started.append_note, but the final store holds commit 3 as "
        "'message.tool.append_note,run_finished.aborted,run_started.resume'; an acknowledged "
        "commit must never be lost or replaced")
    assert v.evidence["held_label"] == "message.tool.append_note,run_finished.aborted,run_started.resume"


def test_a_store_that_ends_before_an_acknowledged_commit_is_caught() -> None:
    obs = changelog_baseline()
    t = obs.transcript
    last = max(t.labels)
    del t.labels[last]
    t.commits -= 1
    violations = check(obs)
    assert ids(violations) == {Id.DURABLE_COMMITS}
    assert f"the final store holds no commit {last} (it holds {last - 1})" in violations[0].message


def test_without_labels_only_the_seqs_are_compared() -> None:
    obs = changelog_baseline()
    obs.transcript.labels = {}
    assert check(obs) == []
    obs.transcript.commits -= 1
    assert ids(check(obs)) == {Id.DURABLE_COMMITS}


def test_a_torn_write_was_never_acknowledged_and_may_be_written_again() -> None:
    b, run_id, result_id = torn_result_builder(1)  # the unacknowledged result, and only it
    b.branch(B.CALL_UNKNOWN_RECORDED_NEVER)
    b.branch(B.CONTINUE_AFTER_TOOL_RESULT)
    finish(b, b.resume(run_id, [b.unknown(run_id, result_id, APPEND)], attempt=1))
    assert check(b.build()) == []


def test_each_check_reports_only_its_own_bug_class() -> None:
    cases = {Id.INTENT_BEFORE_EFFECT: late_intent_builder().build(),
             Id.DURABLE_COMMITS: lost_intent_builder().build(),
             Id.RESERVED_RESULT: _renamed(changelog_builder().build(), "call_1", "m4.x", "unknown")}
    for invariant, obs in cases.items():
        assert ids(check(obs)) & MINE == {invariant}, invariant


def test_messages_are_one_line_and_evidence_is_json() -> None:
    for obs in (late_intent_builder().build(), lost_intent_builder().build()):
        for v in check(obs):
            assert "\n" not in v.message
            json.dumps(v.to_json(), ensure_ascii=False)
