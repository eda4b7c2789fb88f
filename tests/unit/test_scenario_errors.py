"""Scenario mistakes, pure: an observation in, a verdict and its cause out; the renderers and exit
code that show it; and expectations a script cannot meet, refused when the scenario loads."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.cli.exitcodes import Exit
from crashmatrix.harness.cli.verdict_exit import verdict_exit
from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.observation import IncarnationRecord, Observation, Request
from crashmatrix.harness.records.results import CaseResult, Verdict, summary
from crashmatrix.harness.records.transcript import Run, Transcript
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.scenario_error import (
    GAP_FIX,
    LOOP_MIN,
    MistakeKind,
    find_mistake,
    judged_view,
    tripwire,
    with_runaways,
)
from crashmatrix.reports import html, junit, markdown, terminal
from crashmatrix.scenarios import ScenarioError
from crashmatrix.scenarios.loader import load_file
from crashmatrix.scenarios.model import Scenario

TASK = "Append the line 'x' to CHANGELOG.md."
UNKNOWN = ("ERROR: the run was interrupted before this call's result was saved. The external "
           "outcome is unknown")
HEAD = """
task = "Append the line 'x' to CHANGELOG.md."

[tools]
enabled = ["read", "append_note", "stop_run"]

[[script]]
name = "start"
when = { turns = 0 }
reply.tool_calls = [{ tool = "append_note", args = { path = "CHANGELOG.md", line = "x" } }]
"""
DONE = """
[[script]]
name = "done"
when = { last_turn = { append_note = "ok" } }
reply.final = "Added x: FINAL"
"""
AGAIN = """
[[script]]
name = "again"
reply.tool_calls = [{ tool = "read", args = { path = "CHANGELOG.md" } }]
"""


def load(tmp_path: Path, text: str, name: str = "gap") -> Scenario:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return load_file(path)


def call(i: int, tool: str = "append_note", **args: str) -> dict[str, Any]:
    arguments = json.dumps(args or {"path": "CHANGELOG.md", "line": "x"})
    return {"id": f"call_{i}", "type": "function", "function": {"name": tool, "arguments": arguments}}


def assistant(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def tool(i: int, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": content}


START = [{"role": "system", "content": "you are an agent"}, {"role": "user", "content": TASK}]


def gap_observation(history: list[dict[str, Any]], store: Transcript | None = None) -> Observation:
    """Incarnation 1 asks once and is killed; the recovery's request is one no rule matches."""
    inc1 = IncarnationRecord(1, "run", {}, events=[ProbeEvent(1, "provider.before", "chat")],
                             crashed_at=1)
    inc2 = IncarnationRecord(2, "recover", {}, events=[ProbeEvent(1, "provider.before", "chat")],
                             exit_code=1, requests_before=1)
    return Observation(
        case=Case("gap", (CrashStep(1, "provider.before", "chat"),)), incarnations=[inc1, inc2],
        transcript=store or Transcript(), store_read=store is not None,
        requests=[Request(0, START, 200, rule="start", reply=assistant(call(0))),
                  Request(1, history, 400, error_type="crashmatrix_script_gap")],
        workspace_before={}, workspace_after={})


def judge_case(obs: Observation, scenario: Scenario) -> CaseResult:
    return evaluate(obs, scenario, fsync=False, agent="durable-agent", scenario_dirs=[],
                    duration_ms=5.0)


# -- script gap ------------------------------------------------------------------------------

def test_a_gap_names_the_request_its_last_messages_and_the_fix(tmp_path: Path) -> None:
    history = [*START, assistant(call(0)), tool(0, UNKNOWN)]
    mistake = find_mistake(gap_observation(history))
    assert mistake is not None
    assert mistake.kind is MistakeKind.SCRIPT_GAP
    cause = mistake.to_json()
    assert (cause["request"], cause["incarnation"], cause["messages"]) == (1, 2, 4)
    assert cause["last_messages"] == [
        {"role": "user", "text": TASK},
        {"role": "assistant", "text": "calls append_note(path=CHANGELOG.md, line=x)"},
        {"role": "tool", "text": f"call_0: {UNKNOWN}"}]
    assert cause["message"].startswith(f"request #1 (inc2, recover) got HTTP 400 "
                                       f"crashmatrix_script_gap: {GAP_FIX}")
    assert cause["hint"] == 'when = { last_turn = { append_note = "unknown" } }'

    result = judge_case(gap_observation(history), load(tmp_path, HEAD + DONE))
    assert result.verdict is Verdict.SCENARIO_ERROR
    assert result.violations == []
    assert not result.ok
    assert result.scenario_error == cause
    assert result.note == cause["message"]
    again = CaseResult.from_json(json.loads(json.dumps(result.to_json())))
    assert (again.verdict, again.scenario_error) == (Verdict.SCENARIO_ERROR, cause)


def test_a_gap_explains_the_end_state_but_not_what_else_the_agent_did(tmp_path: Path) -> None:
    """With the store read, this hand-made store breaks other promises: those are the agent's."""
    history = [*START, assistant(call(0)), tool(0, UNKNOWN)]
    store = Transcript(runs=[Run("run-1", 1, "prompt", outcome="failed", reason="provider: HTTP 400")])
    result = judge_case(gap_observation(history, store), load(tmp_path, HEAD + DONE))
    assert result.verdict is Verdict.FAIL
    assert InvariantId.SCENARIO_ORACLE.value in result.invariants
    assert set(result.invariants) - {InvariantId.SCENARIO_ORACLE.value}, "others are kept"
    assert result.note is not None
    assert result.note.startswith("the scenario is wrong too: request #1")
    assert result.scenario_error is not None
    assert result.scenario_error["kind"] == "script-gap"


def test_a_gap_no_correct_agent_reaches_is_the_agents_doing(tmp_path: Path) -> None:
    """A request after an ok stop_run (or after a final answer) in the same run is a tripwire."""
    stopped = [*START, assistant(call(0, "stop_run", reason="done"), call(1)),
               tool(0, "stopping the run: done"), tool(1, UNKNOWN)]
    obs = gap_observation(stopped)
    assert find_mistake(obs) is None
    assert tripwire(obs) == ("request #1 got HTTP 400 crashmatrix_script_gap, and that is the agent's "
                             "doing, not the script's: it goes on after stop_run asked the run to stop")
    after_final = [*START, {"role": "assistant", "content": "Added x."}]
    assert find_mistake(gap_observation(after_final)) is None
    # A stop_run whose outcome is unknown asks nothing to stop; nor does one before a new input.
    unknown_stop = [*START, assistant(call(0, "stop_run", reason="done")), tool(0, UNKNOWN)]
    assert find_mistake(gap_observation(unknown_stop)) is not None
    new_input = [*stopped, {"role": "user", "content": "also add y"}]
    mistake = find_mistake(gap_observation(new_input))
    assert mistake is not None
    assert mistake.to_json()["hint"] == "when = { turns = 1 }"


# -- script loop and the step bound ----------------------------------------------------------

def loop_observation(repeats: int, *, killed: bool = True, growing: bool = True, tail: int = 3,
                     store: Transcript | None = None) -> Observation:
    """One incarnation: `repeats` requests, each answered by rule 'again' with a read and followed
    by 9 more events (`tail` after the last request); then killed at its next event (`killed`),
    else it exited 1."""
    requests: list[Request] = []
    events: list[ProbeEvent] = []
    history = list(START)
    for i in range(repeats):
        events.append(ProbeEvent(len(events) + 1, "provider.before", "chat"))
        events += [ProbeEvent(len(events) + 1 + k, "commit.after", "x")
                   for k in range(9 if i < repeats - 1 else tail)]
        requests.append(Request(i, list(history), 200, rule="again",
                                reply=assistant(call(i, "read", path="CHANGELOG.md"))))
        if growing:
            history += [assistant(call(i, "read", path="CHANGELOG.md")), tool(i, "# Changelog")]
    inc = IncarnationRecord(1, "run", {}, events=events,
                            runaway=len(events) + 1 if killed else None,
                            exit_code=None if killed else 1)
    return Observation(case=Case("loop"), incarnations=[inc], transcript=store or Transcript(),
                       requests=requests, workspace_before={}, workspace_after={},
                       store_read=store is not None)


def test_a_script_that_keeps_the_agent_going_past_the_step_bound_is_a_loop() -> None:
    obs = loop_observation(45)  # 444 events, killed at the 445th
    mistake = find_mistake(obs)
    assert mistake is not None
    assert mistake.kind is MistakeKind.SCRIPT_LOOP
    cause = mistake.to_json()
    assert (cause["ended_by"], cause["events"], cause["bound"], cause["rule"], cause["repeats"]) == (
        "max-events", 445, 444, "again", 45)
    assert cause["message"].startswith(
        "inc1 (run) emitted 445 probe events without ending (the step bound, --max-events, is "
        "444), after the script kept it going: rule 'again' answered 45 of its last 45 requests")
    # It explains the runaway (liveness) and the end state, nothing else.
    runaway = with_runaways([], obs)
    assert [v.invariant for v in runaway] == [InvariantId.LIVENESS]
    assert mistake.decides(runaway)
    assert not mistake.decides([*runaway, Violation(InvariantId.PAIRING, "two results")])


def test_a_runaway_without_the_script_looping_is_the_agents_liveness_violation() -> None:
    for obs in (loop_observation(45, growing=False),  # it re-sends one history
                loop_observation(LOOP_MIN - 1),  # too few answers to be a loop
                loop_observation(45, tail=9 + 64)):  # busy on its own after its last request
        assert find_mistake(obs) is None
    obs = loop_observation(45, growing=False)
    (inc,) = judged_view(obs).incarnations
    assert inc.timed_out, "judged as killed by the harness, so no check piles on the crash state"
    hung = Violation(InvariantId.LIVENESS, "inc1 (run) hung", {"incarnation": 1, "events": 444})
    (v,) = with_runaways([hung], obs)
    assert v.message == ("inc1 (run) emitted 445 events in one incarnation without ending; a "
                         "runaway loop (the step bound, --max-events, is 444)")
    assert v.evidence == {"incarnation": 1, "events": 445, "bound": 444}


def test_a_loop_the_agent_gave_up_on_is_a_loop_when_the_scenario_expected_more(tmp_path: Path) -> None:
    store = Transcript(runs=[Run("run-1", 1, "prompt", outcome="failed",
                                reason="step limit 100 reached")])
    obs = loop_observation(30, killed=False, store=store)
    mistake = find_mistake(obs)
    assert mistake is not None
    assert mistake.to_json()["ended_by"] == "agent"
    assert "gave up: its run run-1 ended failed (step limit 100 reached)" in mistake.message
    oracle = Violation(InvariantId.SCENARIO_ORACLE, "ended failed")
    assert mistake.decides([oracle])
    assert not mistake.decides([Violation(InvariantId.LIVENESS, "exit code 2")])
    assert not mistake.decides([]), "a loop the scenario accepts (a step-limit test) is a pass"
    # Without a store the outcome is not judged: nothing to explain, so no finding at all.
    result = judge_case(dataclasses.replace(obs, transcript=Transcript(), store_read=False),
                        load(tmp_path, HEAD + DONE + AGAIN, "loop"))
    assert (result.verdict, result.scenario_error) == (Verdict.PASS, None)


# -- results, exit code, renderers -----------------------------------------------------------

def scenario_error_result() -> CaseResult:
    history = [*START, assistant(call(0)), tool(0, UNKNOWN)]
    mistake = find_mistake(gap_observation(history))
    assert mistake is not None
    return CaseResult("gap/03:commit.written:x/kill", "gap", 1, Verdict.SCENARIO_ERROR,
                      note=mistake.message, scenario_error=mistake.to_json(),
                      repro="crashmatrix repro gap/03:commit.written:x/kill")


def test_summary_json_counts_scenario_errors_and_gives_their_cause() -> None:
    r = scenario_error_result()
    data = summary([r, CaseResult("gap/none", "gap", 0, Verdict.PASS)])
    assert (data["passed"], data["failed"], data["scenario_errors"]) == (1, 1, 1)
    assert data["failures"][0]["verdict"] == "scenario-error"
    assert data["failures"][0]["cause"] == r.note


def test_exit_code_is_2_for_scenario_errors_alone_and_1_with_a_violation() -> None:
    wrong = scenario_error_result()
    passed = CaseResult("gap/none", "gap", 0, Verdict.PASS)
    failed = CaseResult("gap/01:x:y/kill", "gap", 1, Verdict.FAIL)
    assert verdict_exit([passed]) is Exit.HELD
    assert verdict_exit([passed, wrong]) is Exit.USAGE
    assert verdict_exit([passed, wrong], coverage_missing=True) is Exit.USAGE
    assert verdict_exit([wrong, failed]) is Exit.VIOLATIONS
    assert verdict_exit([passed], coverage_missing=True) is Exit.VIOLATIONS


def test_every_renderer_shows_the_verdict_and_its_cause() -> None:
    r = scenario_error_result()
    text = terminal.render([r])
    assert "scenario error" in text.splitlines()[0]
    assert f"  {r.case}  [scenario-error]" in text
    assert "scenario error (script-gap): request #1 (inc2, recover) got HTTP 400" in text
    assert f"          tool: call_0: {UNKNOWN}" in text
    md = markdown.render([r], [])
    assert "0 harness errors, 1 scenario errors" in md
    assert f"- `{r.case}`: scenario-error (script-gap)" in md
    assert GAP_FIX in md
    root = ET.fromstring(junit.render([r]).encode())
    assert (root.get("failures"), root.get("errors")) == ("0", "1")
    error = root.find("testsuite/testcase/error")
    assert error is not None
    assert error.get("type") == "scenario-error"
    assert (error.get("message") or "").startswith("scenario error (script-gap): request #1")
    page = html.render([r], [])
    assert '<span class="badge v-scenario-error">1 scenario error</span>' in page
    assert "<b>scenario error (script-gap)</b>" in page
    assert GAP_FIX in page


def test_a_runaway_timeline_lists_its_first_and_last_events_only() -> None:
    trace = [f"commit.after:e{n}" for n in range(1, 10_001)]
    r = CaseResult("loop/none", "loop", 0, Verdict.FAIL, trace=[trace], crashed_at=[None],
                   exit_codes=[None], violations=[{"invariant": "liveness", "message": "runaway"}])
    page = html.render([r], [])
    assert page.count("<li>") < 200
    assert "… 9850 more …" in page
    assert "commit.after:e10000" in page


# -- expectations the script cannot meet -------------------------------------------------------

def load_error(tmp_path: Path, text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load(tmp_path, text)
    return info.value


def test_a_final_answer_no_rule_can_give_is_refused_at_load(tmp_path: Path) -> None:
    err = load_error(tmp_path, HEAD + DONE + '\n[expect]\nfinal_answer_contains = "1 passed"\n')
    assert (err.field, err.line) == ("expect.final_answer_contains", 18)
    assert err.message == ("no final answer of the script contains '1 passed', so a completed run can "
                           "never meet it (the script's `reply.final` texts: 'Added x: FINAL')")
    err = load_error(tmp_path, HEAD + DONE + '\n[expect]\nfinal_answer_contains = ["FINAL", "nope"]\n')
    assert err.field == "expect.final_answer_contains[1]"
    # A completed run is one of the outcomes expected: it is still checked there.
    err = load_error(tmp_path, HEAD + DONE + '\n[expect]\noutcome = ["completed", "stopped"]\n'
                     'final_answer_contains = "nope"\n')
    assert err.field == "expect.final_answer_contains"


def test_a_completed_run_with_no_final_answer_in_the_script_is_refused_at_load(tmp_path: Path) -> None:
    err = load_error(tmp_path, HEAD + '\n[expect]\noutcome = "completed"\n')
    assert (err.field, err.line) == ("expect.outcome", 13)
    assert "no rule of the script gives a final answer (`reply.final`)" in err.message
    assert load_error(tmp_path, HEAD).field == "expect.outcome", "completed is the default"


@pytest.mark.parametrize(("script", "expect"), [
    (DONE, 'final_answer_contains = "FINAL"'),  # a final answer holds it
    # A placeholder brings in tool output, which may hold anything: not decided.
    (DONE.replace("FINAL", "{last_line.append_note}"), 'final_answer_contains = "1 passed"'),
    # Never completed: the answer is never checked, and no final answer is needed.
    ("", 'outcome = "stopped"\nfinal_answer_contains = "1 passed"'),
    (DONE, 'outcome = ["failed", "stopped"]\nfinal_answer_contains = "1 passed"'),
])
def test_what_cannot_be_decided_from_the_script_alone_is_accepted(tmp_path: Path, script: str,
                                                                  expect: str) -> None:
    load(tmp_path, HEAD + script + f"\n[expect]\n{expect}\n")
