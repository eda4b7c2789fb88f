"""The command an incarnation starts with: `run TASK` until the task is in the store, then `recover`."""

from __future__ import annotations

import dataclasses

from crashmatrix.harness.adapters.interface import Adapter, LaunchSpec
from crashmatrix.harness.adapters.tools import declared_policies
from crashmatrix.scenarios.model import Scenario


def command_for(adapter: Adapter, base: LaunchSpec, scenario: Scenario,
                accepted: bool) -> tuple[LaunchSpec, list[str], dict[str, str]]:
    """The spec, the arguments and the registered policies of an incarnation started now:
    `recover` once the task was accepted (is in the store), else `run TASK` again.

    Restart policies model a registration that changed between the run that recorded a call and
    its recovery, so they apply to incarnations that recover. A `run` re-issued before anything
    was accepted is still a first run: under a restart policy that calls a never-replay tool
    `safe`, its calls would be recorded safe and rightly re-run, a double effect no agent could
    avoid.
    """
    tools = scenario.tools
    declared = declared_policies(adapter)
    policies = {t: p.value for t, p in tools.policies_at(restart=accepted, declared=declared).items()}
    # The agent is told the overrides in the reference vocabulary (safe | never): what it may
    # re-run. The incarnation's record keeps the scenario's words, which the verifier reads.
    overrides = {t: p.replay for t, p in tools.overrides_at(restart=accepted).items()}
    spec = dataclasses.replace(base, policies=overrides)
    args = adapter.recover_args(spec) if accepted else adapter.start_args(spec, scenario.task)
    return spec, args, policies
