"""Turns a plan into a complete Scenario, named by a digest of its content."""

from __future__ import annotations

import hashlib
import json
from types import MappingProxyType

import msgspec

from crashmatrix.harness.explore.expectations import expect
from crashmatrix.harness.explore.plan import INPUT_TOKEN, NOTES_HEADER, ActionKind, InterruptKind, Plan
from crashmatrix.harness.explore.scenario_data import scenario_data
from crashmatrix.harness.explore.script import script
from crashmatrix.scenarios.model import (
    AgentSettings,
    Boundary,
    BoundaryKind,
    Cancel,
    Condition,
    Fault,
    Input,
    Policy,
    ProviderSettings,
    Scenario,
    Tools,
)

SOURCE = "<explore>"  # generated scenarios have no file; repro files carry them as data
NAME_PREFIX = "x-"


def parse_boundary(text: str) -> Boundary:
    kind, sep, label = text.partition(":")
    return Boundary(BoundaryKind(kind), label if sep else None)


def _workspace(plan: Plan) -> dict[str, str]:
    files = {}
    for a in plan.all_actions():
        if a.kind is ActionKind.READ:
            files[a.path] = f"{a.text}\n"
        elif a.kind is ActionKind.APPEND:
            files[a.path] = NOTES_HEADER
    return files


def _tools(plan: Plan) -> Tools:
    first: dict[str, Policy] = {}
    restart: dict[str, Policy] = {}
    for tool, (at_start, on_restart) in plan.policies().items():
        first[tool] = at_start
        if on_restart is not at_start:
            restart[tool] = on_restart
    return Tools(plan.tools(), MappingProxyType(first), MappingProxyType(restart))


def _task(plan: Plan) -> str:
    steps = "; ".join(a.describe() for a in plan.actions())
    return f"Carry out these steps in order, then report: {steps}."


def build_scenario(plan: Plan) -> Scenario:
    inputs: tuple[Input, ...] = ()
    cancels: tuple[Cancel, ...] = ()
    extra = plan.input_action()
    if plan.interrupt is not None:
        at = parse_boundary(plan.interrupt.at)
        if plan.interrupt.kind is InterruptKind.INPUT and extra is not None:
            inputs = (Input("extra", f"Please also append the line '{extra.text}' to {extra.path} "
                                     f"{INPUT_TOKEN}.", at),)
        else:
            cancels = (Cancel("cancel", at),)
    scenario = Scenario(
        name="x",
        source=SOURCE,
        description=" | ".join(plan.describe()),
        task=_task(plan),
        workspace=MappingProxyType(_workspace(plan)),
        tools=_tools(plan),
        agent=AgentSettings(),
        provider=ProviderSettings(call_ids=plan.call_ids),
        script=script(plan),
        faults=tuple(Fault(f.kind, Condition(turns=f.turn)) for f in plan.faults),
        inputs=inputs,
        cancels=cancels,
        expect=expect(plan),
    )
    return msgspec.structs.replace(scenario, name=scenario_name(scenario))


def scenario_name(scenario: Scenario) -> str:
    """`x-` and a digest of everything but the name: equal content, equal name and case ids."""
    data = scenario_data(scenario)
    del data["name"]
    text = json.dumps(data, sort_keys=True, ensure_ascii=False)
    return NAME_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:10]
