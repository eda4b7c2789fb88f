"""The verifier's contract: its vocabulary, the clean baseline, and one violation per invariant."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

import pytest

from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.observation import (
    Delivery,
    IncarnationRecord,
    Intrusion,
    Observation,
    RawOutput,
)
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.harness.verify import CHECKS, InvariantId, Violation, judge, verify
from crashmatrix.harness.verify.checks import FROM_STORE
from crashmatrix.scenarios.model import BoundaryKind as K
from crashmatrix.scenarios.model import Expect, Outcome, Scenario
from tests.support.framework_case import KEYED_MAIL, UNKEYED_MAIL, mailed
from tests.support.observations import (
    APPEND,
    WITNESS,
    ObservationBuilder,
    changelog_baseline,
    changelog_builder,
    changelog_scenario,
    crashed_at_append,
    late_intent_builder,
    lost_intent_builder,
    lying_success_builder,
    rerun_builder,
)
from tests.support.step_observations import asked_after_final, retries_restarted

Id = InvariantId
Case = tuple[Observation, Scenario]


def ids(violations: list[Violation]) -> set[InvariantId]:
    return {v.invariant for v in violations}


def test_invariant_ids_are_the_design_vocabulary_in_report_order() -> None:
    assert [i.value for i in InvariantId] == [
        "one-writer", "log-integrity", "pairing", "at-most-once", "no-silent-success",
        "downstream-key", "status-before-resend", "downstream-backed", "safe-rerun",
        "finished-stays-finished", "continuation", "resume-budget", "queued-input",
        "retry-intent",
        "intent-before-effect", "reserved-result", "durable-commits",
        "final-ends-run", "retry-bound",
        "liveness", "scenario-oracle",
    ]
    assert list(CHECKS) == list(InvariantId)


def test_the_baseline_holds_every_invariant() -> None:
    obs = changelog_baseline()
    assert obs.case.case_id == "changelog/15:effect.after:append_note/kill"
    assert verify(obs, changelog_scenario()) == []


def test_each_check_is_pure_and_deterministic() -> None:
    obs, scenario = _silent_success()
    before = repr(obs)
    first = verify(obs, scenario)
    assert first == verify(obs, scenario)
    assert repr(obs) == before


def test_violation_to_json() -> None:
    v = Violation(Id.AT_MOST_ONCE, "call call_1 (append_note) took effect 2 times",
                  {"call_id": "call_1", "events": ["inc1#14", "inc2#5"]})
    assert v.to_json() == {"invariant": "at-most-once",
                           "message": "call call_1 (append_note) took effect 2 times",
                           "evidence": {"call_id": "call_1", "events": ["inc1#14", "inc2#5"]}}


# -- one mutation of the baseline per invariant ------------------------------------------------
def _baseline() -> Case:
    return changelog_baseline(), changelog_scenario()


def _store_unreadable() -> Case:
    obs, scenario = _baseline()
    obs.transcript.integrity_error = "commit 6: run run-4 finished twice"
    return obs, scenario


def _duplicate_result() -> Case:
    obs, scenario = _baseline()
    messages = obs.transcript.messages
    read_result = next(m for m in messages if m.call_id == "call_2")
    messages.insert(messages.index(read_result) + 1, dataclasses.replace(read_result, msg_id="dup"))
    return obs, scenario


def _witness_ran_twice() -> Case:
    obs, scenario = _baseline()
    obs.workspace_after[WITNESS] += "ran\n"
    return obs, scenario


def _silent_success() -> Case:
    return lying_success_builder().build(), changelog_scenario()


def _never_call_rerun() -> Case:
    return rerun_builder().build(), changelog_scenario()


def _settle_asks_provider() -> Case:
    obs, scenario = _baseline()
    settle = obs.incarnations[-1]
    settle.events.append(ProbeEvent(len(settle.events) + 1, "provider.before", "chat"))
    return obs, scenario


def _bare_continue_sent() -> Case:
    obs, scenario = _baseline()
    sent = obs.requests[1]
    extra = {"role": "user", "content": "continue"}
    obs.requests[1] = dataclasses.replace(sent, messages=[*sent.messages, extra])
    return obs, scenario


def _no_budget() -> Case:
    obs, scenario = _baseline()
    obs.resume_budget = 0
    return obs, scenario


def _input_lost() -> Case:
    obs, scenario = _baseline()
    obs.deliveries.append(Delivery("input", "in-1", "also mention the ticket", 2, 20))
    return obs, scenario


def _failed_request_passed_off_as_reply() -> Case:
    # The fake answered 500, yet the agent's probe said "reply" and nothing was recorded.
    obs, scenario = _baseline()
    obs.requests[2] = dataclasses.replace(obs.requests[2], status=500, fault="http_500")
    return obs, scenario


def _intent_after_effect() -> Case:
    return late_intent_builder().build(), changelog_scenario()


def _repair_under_a_fresh_id() -> Case:
    obs, scenario = _baseline()
    messages = obs.transcript.messages
    k = next(k for k, m in enumerate(messages) if m.recovered == "unknown")
    messages[k] = dataclasses.replace(messages[k], msg_id=f"m{messages[k].seq}.c-call_1")
    return obs, scenario


def _acknowledged_commit_lost() -> Case:
    return lost_intent_builder().build(), changelog_scenario()


def _settle_hangs() -> Case:
    obs, scenario = _baseline()
    obs.incarnations[-1].timed_out = True
    obs.incarnations[-1].exit_code = None
    return obs, scenario


def _second_process_committed() -> Case:
    obs, scenario = _baseline()
    holder = obs.incarnations[1]
    holder.frozen_at = 4
    record = IncarnationRecord(holder.index, "recover", {}, exit_code=0, intruder=True,
                               events=[ProbeEvent(1, K.COMMIT_WRITTEN.value, "notice", {"seq": 12})])
    obs.intrusions = [Intrusion(holder.index, 99, "agent recover", record, output="",
                                requests_after=0)]
    return obs, scenario


def _expects_cancelled() -> Case:
    obs, _ = _baseline()
    return obs, changelog_scenario(Expect(outcome=(Outcome.CANCELLED,)))


MUTATIONS: dict[InvariantId, tuple[Callable[[], Case], set[InvariantId]]] = {
    Id.ONE_WRITER: (_second_process_committed, {Id.ONE_WRITER}),
    Id.LOG_INTEGRITY: (_store_unreadable, {Id.LOG_INTEGRITY}),
    # The provider saw the history before the duplicate was committed: the store diverges too;
    # and the duplicate is not under the id the call's tool_started reserved.
    Id.PAIRING: (_duplicate_result, {Id.PAIRING, Id.CONTINUATION, Id.RESERVED_RESULT}),
    Id.AT_MOST_ONCE: (_witness_ran_twice, {Id.AT_MOST_ONCE}),
    Id.NO_SILENT_SUCCESS: (_silent_success, {Id.NO_SILENT_SUCCESS}),
    Id.SAFE_RERUN: (_never_call_rerun, {Id.SAFE_RERUN}),
    # Asking after the completed run's final answer: its run chain had ended too.
    Id.FINISHED_STAYS_FINISHED: (_settle_asks_provider, {Id.FINISHED_STAYS_FINISHED,
                                                         Id.FINAL_ENDS_RUN}),
    Id.CONTINUATION: (_bare_continue_sent, {Id.CONTINUATION}),
    Id.RESUME_BUDGET: (_no_budget, {Id.RESUME_BUDGET}),
    Id.QUEUED_INPUT: (_input_lost, {Id.QUEUED_INPUT}),
    Id.RETRY_INTENT: (_failed_request_passed_off_as_reply, {Id.RETRY_INTENT}),
    Id.INTENT_BEFORE_EFFECT: (_intent_after_effect, {Id.INTENT_BEFORE_EFFECT}),
    Id.RESERVED_RESULT: (_repair_under_a_fresh_id, {Id.RESERVED_RESULT}),
    Id.DURABLE_COMMITS: (_acknowledged_commit_lost, {Id.DURABLE_COMMITS}),
    Id.FINAL_ENDS_RUN: (asked_after_final, {Id.FINAL_ENDS_RUN}),
    Id.RETRY_BOUND: (retries_restarted, {Id.RETRY_BOUND}),
    Id.LIVENESS: (_settle_hangs, {Id.LIVENESS}),
    Id.SCENARIO_ORACLE: (_expects_cancelled, {Id.SCENARIO_ORACLE}),
    # A key made anew for the re-send: the service cannot tell it is the same email, and applies it
    # again (which at-most-once counts).
    Id.DOWNSTREAM_KEY: (lambda: mailed(KEYED_MAIL, ("applied", "k-1", 1), ("applied", "k-2", 2)),
                        {Id.DOWNSTREAM_KEY, Id.AT_MOST_ONCE}),
    # No key, and sent again after the crash without asking the service first.
    Id.STATUS_BEFORE_RESEND: (lambda: mailed(UNKEYED_MAIL, ("applied", None, 1), ("applied", None, 2)),
                              {Id.STATUS_BEFORE_RESEND, Id.AT_MOST_ONCE}),
    # "sent" told the model, and the service never applied anything.
    Id.DOWNSTREAM_BACKED: (lambda: mailed(KEYED_MAIL, emails_sent=1), {Id.DOWNSTREAM_BACKED}),
}


def test_every_invariant_has_a_mutation() -> None:
    assert set(MUTATIONS) == set(InvariantId)


@pytest.mark.parametrize("invariant", list(MUTATIONS), ids=str)
def test_mutation_is_caught_by_its_invariant_only(invariant: InvariantId) -> None:
    make, expected = MUTATIONS[invariant]
    obs, scenario = make()
    violations = verify(obs, scenario)
    assert ids(violations) == expected
    for v in violations:
        assert (v.message and v.message[0].islower()) or v.message[0].isupper()
        json.dumps(v.to_json(), ensure_ascii=False)  # evidence must be JSON-able


def test_violations_come_in_checks_order() -> None:
    obs, scenario = _duplicate_result()
    obs.incarnations[-1].timed_out = True
    order = [v.invariant for v in verify(obs, scenario)]
    ranks = [list(CHECKS).index(i) for i in order]
    assert order
    assert ranks == sorted(ranks)


def test_an_unreadable_store_is_judged_by_store_free_checks_only() -> None:
    obs, scenario = _baseline()
    obs.transcript = Transcript(integrity_error="session.jsonl: line 3: checksum mismatch")
    violations = verify(obs, scenario)
    assert ids(violations) == {Id.LOG_INTEGRITY}
    assert "line 3: checksum mismatch" in violations[0].message


def test_verify_builds_one_trace_per_observation_and_checks_share_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from crashmatrix.harness.verify import trace as trace_module  # noqa: PLC0415 - patched below

    built: list[Observation] = []
    original = trace_module.Trace.__init__

    def counting(self: trace_module.Trace, obs: Observation) -> None:
        built.append(obs)
        original(self, obs)

    monkeypatch.setattr(trace_module.Trace, "__init__", counting)
    obs, scenario = changelog_baseline(), changelog_scenario()
    assert verify(obs, scenario) == []
    assert built == [obs]
    # Outside verify (or for another observation) a check gets a trace of its own.
    other = changelog_baseline()
    assert trace_module.Trace.of(other).obs is other
    assert trace_module.Trace.of(obs) is not trace_module.Trace.of(obs)


# -- without a store reader: judged from what the harness owns, the rest not applicable ---------
def _without_store(obs: Observation) -> Observation:
    return dataclasses.replace(obs, store_read=False)


def test_without_a_store_the_store_bound_invariants_are_not_applicable_and_the_rest_hold() -> None:
    judgement = judge(_without_store(changelog_baseline()), changelog_scenario())
    assert judgement.violations == []
    whole = {n.invariant for n in judgement.not_applicable if not n.partly}
    partly = {n.invariant for n in judgement.not_applicable if n.partly}
    assert whole == set(FROM_STORE)
    assert partly == {InvariantId.PAIRING, InvariantId.CONTINUATION, InvariantId.SCENARIO_ORACLE,
                      InvariantId.LIVENESS, InvariantId.AT_MOST_ONCE, InvariantId.FINAL_ENDS_RUN,
                      InvariantId.RETRY_BOUND, InvariantId.DOWNSTREAM_KEY,
                      InvariantId.STATUS_BEFORE_RESEND}
    # one-writer reads only what the harness recorded around a second process: judged whole.
    assert set(InvariantId) == whole | partly | {InvariantId.ONE_WRITER}, \
        "every invariant is judged, partly judged or said"
    assert all("no 'store' capability" in n.reason for n in judgement.not_applicable)
    # With a store, nothing is left unjudged.
    assert judge(changelog_baseline(), changelog_scenario()).not_applicable == []


def test_without_a_store_a_double_append_is_still_at_most_once() -> None:
    obs = _without_store(rerun_builder(APPEND, kill_at=K.EFFECT_AFTER).build())
    violated = judge(obs, changelog_scenario()).violations
    # The workspace shows it (and the oracle's file rule); the store-bound safe-rerun cannot.
    assert ids(violated) == {InvariantId.AT_MOST_ONCE, InvariantId.SCENARIO_ORACLE}
    double = next(v for v in violated if v.invariant is InvariantId.AT_MOST_ONCE)
    assert (double.evidence["added"], double.evidence["allowed"]) == (2, 1)


def test_without_a_store_a_resent_task_is_still_continuation() -> None:
    b = changelog_builder()
    b.request(messages=[{"role": "user", "content": changelog_scenario().task}] * 2)
    violated = judge(_without_store(b.build()), changelog_scenario()).violations
    assert InvariantId.CONTINUATION in ids(violated)
    assert any("carries the task 2 times" in v.message for v in violated)


def test_without_a_store_an_api_pairing_refusal_is_still_pairing() -> None:
    b = changelog_builder()
    b.request(status=400)
    violated = judge(_without_store(b.build()), changelog_scenario()).violations
    assert InvariantId.PAIRING in ids(violated)


def test_a_result_the_model_was_shown_and_the_store_then_lost_is_a_continuation_violation() -> None:
    """Issue 16's "a result the model was shown is never lost": an agent that sends a result
    before it is durable, and loses it to a power loss, shows the model history the store no
    longer holds; every later request must be a prefix of the final store, so `continuation`
    names the request and the result."""
    obs = changelog_baseline()
    shown = next(m for r in obs.requests for m in r.messages if m.get("role") == "tool")
    kept = [m for m in obs.transcript.messages
            if m.wire() != shown]
    assert len(kept) == len(obs.transcript.messages) - 1, "the builder stores each result once"
    lost = dataclasses.replace(obs, transcript=dataclasses.replace(obs.transcript, messages=kept))
    violations = [v for v in verify(lost, changelog_scenario()) if v.invariant is InvariantId.CONTINUATION]
    assert violations, "a shown result the store lost must not pass"
    assert violations[0].evidence["sent"] == shown


def test_on_the_other_wires_only_a_refusal_the_fake_marks_as_pairing_is_pairing() -> None:
    """The Responses wire refuses an unknown previous_response_id with a 400 too: that is no
    pairing violation; its 'No tool output found' refusal is."""
    for pairing, expected in ((False, set()), (True, {InvariantId.PAIRING})):
        b = changelog_builder()
        b.request(status=400)
        obs = b.build()
        last = dataclasses.replace(obs.requests[-1], wire="responses", error_type="invalid_request_error",
                                   pairing=pairing)
        obs = dataclasses.replace(obs, requests=[*obs.requests[:-1], last])
        assert ids(judge(obs, changelog_scenario()).violations) & {InvariantId.PAIRING} == expected


def test_a_probe_protocol_error_is_a_liveness_violation_naming_the_line() -> None:
    obs, scenario = _baseline()
    assert Id.LIVENESS not in {v.invariant for v in verify(obs, scenario)}
    obs.incarnations[0].protocol_error = "probe line 7 is not UTF-8 JSON: b'garbage'"
    (v,) = [v for v in verify(obs, scenario) if v.invariant is Id.LIVENESS]
    assert "inc1 (run) broke the probe protocol and was killed: probe line 7" in v.message


def _with_sent(obs: Observation, change: Callable[[list[dict[str, object]]], None]) -> Observation:
    """The observation with every request's messages passed through `change` (a deep copy)."""
    requests = []
    for r in obs.requests:
        messages = json.loads(json.dumps(r.messages))
        change(messages)
        requests.append(dataclasses.replace(r, messages=messages))
    return dataclasses.replace(obs, requests=requests)


def _continuation(obs: Observation) -> list[Violation]:
    return [v for v in verify(obs, changelog_scenario()) if v.invariant is InvariantId.CONTINUATION]


def test_continuation_compares_what_the_model_sees_not_the_wire_keys() -> None:
    """A client that adds keys the model does not read (LangChain JS's `name` on tool messages,
    `refusal: null`), sends text as parts, or serialises the same arguments differently carries
    the same history."""
    obs = changelog_baseline()

    def incidental(messages: list[dict[str, object]]) -> None:
        for m in messages:
            if m.get("role") == "tool":
                m["name"] = "append_note"
            if m.get("role") == "assistant":
                m["refusal"] = None
                for c in m.get("tool_calls") or []:  # type: ignore[attr-defined]
                    args = json.loads(c["function"]["arguments"])
                    c["function"]["arguments"] = json.dumps(dict(reversed(args.items())), indent=1)
            if m.get("role") == "user":
                m["content"] = [{"type": "text", "text": m["content"]}]

    changed = _with_sent(obs, incidental)
    assert changed.requests != obs.requests, "the change must reach the requests"
    assert any("name" in m for r in changed.requests for m in r.messages)
    assert _continuation(changed) == []


def test_continuation_still_sees_a_changed_argument() -> None:
    obs = changelog_baseline()

    def other_line(messages: list[dict[str, object]]) -> None:
        for m in messages:
            for c in m.get("tool_calls") or []:  # type: ignore[attr-defined]
                args = json.loads(c["function"]["arguments"])
                if "line" in args:
                    c["function"]["arguments"] = json.dumps({**args, "line": "another line"})

    violations = _continuation(_with_sent(obs, other_line))
    assert violations, "a changed argument is history the agent rewrote"
    assert "another line" in json.dumps(violations[0].evidence["sent"])


def _restarts_all_fail(store_error: str | None) -> Observation:
    """Killed at the append, then two restarts that each die with exit 1 before any commit."""
    b = ObservationBuilder()
    crashed_at_append(b)
    for _ in range(2):
        b.incarnation()
        b.exit(1)
    obs = b.build()
    obs.transcript.integrity_error = store_error
    return obs


def test_a_run_a_crash_left_unfinishable_is_named_as_such() -> None:
    """A kill inside a session file's write leaves it empty; every restart dies parsing it: the
    run can no longer complete (liveness says so), beside the store's damage (log-integrity)."""
    obs = _restarts_all_fail("session.json: Expecting value: line 1 column 1 (char 0)")
    violated = verify(obs, changelog_scenario())
    stuck = [v for v in violated if v.evidence.get("cannot_complete")]
    assert [v.invariant for v in stuck] == [InvariantId.LIVENESS]
    assert stuck[0].evidence["restarts"] == [{"incarnation": 2, "exit_code": 1},
                                            {"incarnation": 3, "exit_code": 1}]
    assert "can no longer complete" in stuck[0].message
    assert "Expecting value" in stuck[0].message
    assert InvariantId.LOG_INTEGRITY in ids(violated)
    # With the store readable and the run left open, it is the same finding, said once.
    readable = verify(_restarts_all_fail(None), changelog_scenario())
    liveness = [v for v in readable if v.invariant is InvariantId.LIVENESS]
    assert [v.evidence.get("cannot_complete") for v in liveness] == [True]


def test_a_restart_that_succeeds_or_a_run_the_agent_closed_is_no_lost_run() -> None:
    recovered = _restarts_all_fail("session.json: Expecting value")
    recovered.incarnations[-1].exit_code = 0
    assert not any(v.evidence.get("cannot_complete") for v in verify(recovered, changelog_scenario()))
    closed = _restarts_all_fail(None)  # the agent aborted the run: its verdict, not a lost run
    assert closed.transcript.runs, "the builder's run is in the store"
    closed.transcript.runs = [dataclasses.replace(r, outcome="aborted") for r in closed.transcript.runs]
    assert not any(v.evidence.get("cannot_complete") for v in verify(closed, changelog_scenario()))
    damaged = _restarts_all_fail("commit 9: duplicate seq")  # damaged, but the run was closed
    damaged.transcript.runs = [dataclasses.replace(r, outcome="failed") for r in damaged.transcript.runs]
    assert not any(v.evidence.get("cannot_complete") for v in verify(damaged, changelog_scenario()))


def test_continuation_sees_what_the_model_reads_beyond_the_wire_keys_it_ignores() -> None:
    from crashmatrix.harness.verify.continuation import model_view  # noqa: PLC0415 - one test's subject

    tool = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    assert model_view({**tool, "name": "append_note"}) == model_view(tool)  # repeats the call's tool
    said = {"role": "user", "content": "hi"}
    assert model_view({**said, "name": "mallory"}) != model_view(said)  # a participant the model is told of
    own = {"role": "assistant", "content": "hi"}
    assert model_view({**own, "name": "changelog"}) == model_view(own)  # the framework's own agent's name
    assert model_view({**said, "function_call": {"name": "x", "arguments": "{}"}}) != model_view(said)
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    assert model_view(image) != model_view({"role": "user", "content": json.dumps(image["content"])})
    two = {"role": "user", "content": [{"type": "text", "text": "ab"}, {"type": "text", "text": "c"}]}
    assert model_view(two) != model_view({"role": "user", "content": [{"type": "text", "text": "a"},
                                                                       {"type": "text", "text": "bc"}]})


def test_a_malformed_request_message_is_a_violation_never_a_crash_of_the_check() -> None:
    obs = changelog_baseline()

    def broken(messages: list[dict[str, object]]) -> None:
        for m in messages:
            if m.get("tool_calls"):
                m["tool_calls"] = [{"id": "call_1", "function": "append_note"}]

    violations = _continuation(_with_sent(obs, broken))
    assert violations, "a call the model could not have made is history the agent rewrote"


def test_a_restart_that_cannot_load_the_app_is_named_with_its_last_words() -> None:
    """W3: an app that no longer loads at recovery (a factory that raises) reads as a run that
    cannot complete, with the error the restart printed, not only as an unmet expectation."""
    obs = _restarts_all_fail(None)
    obs.incarnations[1].output = RawOutput(
        b"Traceback (most recent call last):\n  File \"graph.py\", line 70\n"
        b"\x1b[31mRuntimeError: the graph factory exploded\x1b[0m\n\n")
    stuck = [v for v in verify(obs, changelog_scenario()) if v.evidence.get("cannot_complete")]
    assert [v.invariant for v in stuck] == [InvariantId.LIVENESS]
    assert "inc2 said: RuntimeError: the graph factory exploded" in stuck[0].message
    assert stuck[0].evidence["last_words"] == "RuntimeError: the graph factory exploded"
