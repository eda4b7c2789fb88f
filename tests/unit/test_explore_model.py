"""Generated scenarios, without processes: valid, named by content, and their expectations hold
for a correct agent at every crash point (simulated here at tool-call granularity)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from crashmatrix.agent.records import UNKNOWN_OUTCOME_TEXT
from crashmatrix.fakes.conversation import Conversation
from crashmatrix.fakes.script import match_rule, reply_message
from crashmatrix.harness.explore.build import build_scenario
from crashmatrix.harness.explore.plan import (
    Action,
    ActionKind,
    Care,
    FaultSpec,
    Interrupt,
    InterruptKind,
    Plan,
)
from crashmatrix.harness.explore.scenario_data import scenario_data
from crashmatrix.harness.explore.schedule import Draw
from crashmatrix.harness.explore.strategies import MAX_CRASHES, boundaries, examples, plans
from crashmatrix.harness.explore.variants import Generated, Variant
from crashmatrix.scenarios.model import (
    CallIds,
    Outcome,
    Policy,
    ProviderFault,
    Scenario,
    ToolName,
    count_lines,
)
from crashmatrix.scenarios.schema import parse_scenario

# Building a scenario digests its data: well under a millisecond, but a loaded CI machine
# should not turn that into a deadline failure.
QUICK = settings(deadline=None)


@QUICK
@given(plans())
def test_generated_scenarios_are_valid_scenario_files(plan: Plan) -> None:
    scenario = build_scenario(plan)
    back = parse_scenario(scenario_data(scenario), source=scenario.source, default_name="unused")
    assert back == scenario
    assert build_scenario(plan).name == scenario.name, "the name is a function of the content"
    assert len(plan.actions()) <= 6
    assert sum(a.kind is ActionKind.BASH for a in plan.actions()) <= 1
    assert len({a.slot for a in plan.all_actions()}) == len(plan.all_actions())


@QUICK
@given(plans())
def test_expectations_are_consistent(plan: Plan) -> None:
    expect = build_scenario(plan).expect
    for rule in expect.lines:
        assert rule.max is None or rule.min <= rule.max
        if rule.path in expect.files:
            # An exact file and a line count on it must agree.
            assert rule.min <= count_lines(expect.files[rule.path], rule.line) <= (rule.max or 0)
    if plan.cancelled_maybe:
        assert Outcome.CANCELLED in expect.outcome
        assert all(rule.min == 0 for rule in expect.lines)
        assert not expect.files
    else:
        assert expect.outcome == (Outcome.COMPLETED,)


def test_an_input_arrives_only_where_every_schedule_passes() -> None:
    turns = ((Action(ActionKind.APPEND, 0, Care.BLIND), Action(ActionKind.READ, 1)),)
    assert boundaries(turns, InterruptKind.INPUT) == ["inbox.poll", "provider.after:reply",
                                                      "effect.after:read"]
    assert "effect.after:append_note" in boundaries(turns, InterruptKind.CANCEL)


def test_a_single_blind_append_may_be_missing_only_if_the_crash_came_first() -> None:
    lone = build_scenario(Plan(((Action(ActionKind.APPEND, 0, Care.BLIND),),))).expect.lines[0]
    assert str(lone.missing_ok_if_crash_before) == "effect.after:append_note"
    assert (lone.min, lone.max) == (1, 1)
    two = Plan(((Action(ActionKind.APPEND, 0, Care.BLIND), Action(ActionKind.APPEND, 1)),))
    blind = build_scenario(two).expect.lines[0]
    assert blind.missing_ok_if_crash_before is None
    assert (blind.min, blind.max) == (0, 1)


# -- a correct agent, simulated at tool-call granularity ---------------------------------------

class Hit(StrEnum):
    """Where a crash falls around one call (the real harness crashes at every probe event; at
    this granularity, these are the outcomes that differ)."""

    UNSTARTED = "unstarted"  # before tool_started: the call is unknown and never re-run
    BEFORE = "before"  # tool_started saved, effect not run
    AFTER = "after"  # effect run, result not saved
    SAVED = "saved"  # result saved; the rest of the turn never starts


@dataclass
class Sim:
    scenario: Scenario
    files: dict[str, str]
    messages: list[dict[str, Any]] = field(default_factory=list)
    crashes: int = 0
    append_effect: bool = False  # effect.after:append_note was reached

    def policy(self, tool: str, *, restart: bool) -> Policy:
        return self.scenario.tools.policies_at(restart=restart)[ToolName(tool)]

    def effect(self, tool: str, args: dict[str, str]) -> str:
        if tool == "read":
            return self.files[args["path"]]
        if tool == "append_note":
            self.files[args["path"]] = self.files.get(args["path"], "") + args["line"] + "\n"
            self.append_effect = True
            return f"appended 1 line to {args['path']}"
        if tool == "write":
            self.files[args["path"]] = args["content"]
            return f"wrote {len(args['content'])} characters to {args['path']}"
        witness, out = args["command"].split(">> ")[1].split("; echo ")
        self.files[witness] = self.files.get(witness, "") + "ran\n"
        return f"exit code 0\n{out}\n"

    def recovered(self, tool: str, args: dict[str, str], started_safe: bool) -> str:
        if started_safe and self.policy(tool, restart=True) is Policy.SAFE:
            return self.effect(tool, args)
        return UNKNOWN_OUTCOME_TEXT

    def turn(self, calls: list[dict[str, Any]], hits: dict[int, Hit], counter: int) -> int:
        crashed = False
        for call in calls:
            tool, args = call["function"]["name"], _args(call)
            hit = hits.get(counter) if not crashed else None
            counter += 1
            started_safe = self.policy(tool, restart=self.crashes > 0) is Policy.SAFE
            if crashed or hit is Hit.UNSTARTED:
                content = UNKNOWN_OUTCOME_TEXT
            elif hit is Hit.BEFORE:
                content = self.recovered(tool, args, started_safe)
            elif hit is Hit.AFTER:
                self.effect(tool, args)
                content = self.recovered(tool, args, started_safe)
            else:
                content = self.effect(tool, args)
            if hit is not None and not crashed:
                self.crashes += 1
                crashed = True
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        return counter


def _args(call: dict[str, Any]) -> dict[str, str]:
    import json  # noqa: PLC0415 - local to the one helper that decodes arguments

    args: dict[str, str] = json.loads(call["function"]["arguments"])
    return args


def simulate(plan: Plan, hits: dict[int, Hit], interrupt_after: int) -> tuple[Sim, Outcome, str]:
    scenario = build_scenario(plan)
    sim = Sim(scenario, dict(scenario.workspace), [{"role": "user", "content": scenario.task}])
    counter = 0
    delivered = False
    for _ in range(100):
        conv = Conversation(sim.messages, scenario.provider.unknown_marker)
        rule = match_rule(scenario, conv)
        assert rule is not None, f"script gap after {sim.messages}"
        if scenario.inputs and not delivered and (counter >= interrupt_after or rule.reply.is_final):
            # The input's boundary is reached before the run can complete, in every schedule.
            sim.messages.append({"role": "user", "content": scenario.inputs[0].text})
            delivered = True
            continue
        message = reply_message(rule.reply, conv)
        sim.messages.append(message)
        if not message.get("tool_calls"):
            return sim, Outcome.COMPLETED, str(message["content"])
        counter = sim.turn(message["tool_calls"], hits, counter)
        if scenario.cancels and counter > interrupt_after:
            return sim, Outcome.CANCELLED, ""
    raise AssertionError("the generated model never finished")


@settings(QUICK, max_examples=200)
@given(plans(), st.dictionaries(st.integers(0, 12), st.sampled_from(Hit), max_size=MAX_CRASHES),
       st.integers(0, 8))
def test_a_correct_agent_meets_the_expectations_at_every_crash(
        plan: Plan, hits: dict[int, Hit], interrupt_after: int) -> None:
    sim, outcome, answer = simulate(plan, hits, interrupt_after)
    expect = sim.scenario.expect
    assert outcome in expect.outcome
    for rule in expect.lines:
        count = count_lines(sim.files.get(rule.path), rule.line)
        assert rule.accepts(count, crashes=sim.crashes, boundary_reached=sim.append_effect), (
            rule, count, sim.crashes)
    for path, text in expect.files.items():
        assert sim.files.get(path) == text
    if outcome is Outcome.COMPLETED:
        for needle in expect.final_answer_contains:
            assert needle in answer


def test_the_simulation_loses_a_blind_line_and_doubles_nothing() -> None:
    plan = Plan(((Action(ActionKind.APPEND, 0, Care.BLIND),),))
    sim, outcome, _ = simulate(plan, {0: Hit.BEFORE}, 0)
    assert outcome is Outcome.COMPLETED
    assert sim.files["n0.md"] == "# notes\n"
    careful = dataclasses.replace(plan, turns=((Action(ActionKind.APPEND, 0),),))
    sim, _, _ = simulate(careful, {0: Hit.AFTER}, 0)
    assert sim.files["n0.md"] == "# notes\nnote-0\n"


def test_faults_interrupts_and_policies_reach_the_scenario() -> None:
    plan = Plan(((Action(ActionKind.READ, 0), Action(ActionKind.WRITE, 1)),),
                read_policy=Policy.NEVER, read_restart_policy=Policy.SAFE, write_policy=Policy.SAFE,
                faults=(FaultSpec(ProviderFault.HTTP_429, 1),),
                interrupt=Interrupt(InterruptKind.CANCEL, "effect.after:read"))
    s = build_scenario(plan)
    assert s.tools.policies_at(restart=False) == {ToolName.READ: Policy.NEVER,
                                                  ToolName.WRITE: Policy.SAFE}
    assert s.tools.policies_at(restart=True)[ToolName.READ] is Policy.SAFE
    assert [(f.kind, f.when.turns) for f in s.faults] == [(ProviderFault.HTTP_429, 1)]
    assert [str(c.at) for c in s.cancels] == ["effect.after:read"]
    assert s.name.startswith("x-")


def test_a_per_response_id_scheme_reaches_the_scenario_and_the_description() -> None:
    turns = ((Action(ActionKind.READ, 0),), (Action(ActionKind.APPEND, 1),))
    plain, reused = Plan(turns), Plan(turns, call_ids=CallIds.PER_RESPONSE)
    assert build_scenario(plain).provider.call_ids is CallIds.HISTORY
    assert build_scenario(reused).provider.call_ids is CallIds.PER_RESPONSE
    assert not any("call ids" in line for line in plain.describe())
    assert "call ids: per-response" in " | ".join(reused.describe())
    # Different schemes are different scenarios (the name is a digest of the scenario).
    assert build_scenario(plain).name != build_scenario(reused).name


@given(examples(interrupts=False, torn=False))
def test_an_agent_without_inbox_or_tear_is_given_no_interrupt_and_no_torn_write(
        example: tuple[Variant, tuple[Draw, ...]]) -> None:
    variant, draws = example
    assert isinstance(variant, Generated)
    assert variant.plan.interrupt is None
    assert {d.fault for d in draws} == {"kill"}
