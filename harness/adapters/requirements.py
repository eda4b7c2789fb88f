"""What a scenario asks of an adapter (capabilities, tools): refused up front, never skipped. Pure
but for the adapter's own `declared_tools`, which may load the agent once (PreflightError)."""

from __future__ import annotations

from collections.abc import Iterable

from crashmatrix.harness.adapters.interface import Adapter, Capability, declared_tools_of
from crashmatrix.harness.adapters.tools import tool_misfit
from crashmatrix.scenarios.model import AgentSettings, Scenario

DEFAULT_MAX_STEPS = AgentSettings().max_steps


class Unsupported(ValueError):
    """A case asks an adapter for a capability it does not declare (a usage error)."""


def agent_label(adapter: Adapter) -> str:
    """How messages name the agent: a hosted app by its integration and app (`langgraph:m:build`)."""
    app = getattr(adapter, "app", None)
    return f"{adapter.name}:{app}" if isinstance(app, str) else adapter.name


def misfit(adapter: Adapter, scenario: Scenario) -> list[str]:
    """Why `scenario` cannot run against this agent: one sentence per reason; [] when it can."""
    out = []
    if (scenario.inputs or scenario.cancels) and Capability.INBOX not in adapter.capabilities:
        what = " and ".join(w for w, items in (("inputs", scenario.inputs), ("cancels", scenario.cancels))
                            if items)
        out.append(f"scenario {scenario.name!r} delivers {what} while the agent runs, but agent "
                   f"{agent_label(adapter)!r} declares no {Capability.INBOX.value!r} capability "
                   f"(a durable inbox the harness can deliver to)")
    if scenario.agent.max_steps != DEFAULT_MAX_STEPS and Capability.STEP_LIMIT not in adapter.capabilities:
        out.append(f"scenario {scenario.name!r} sets [agent] max_steps = {scenario.agent.max_steps} and "
                   f"expects the run to end there, but agent {agent_label(adapter)!r} declares no "
                   f"{Capability.STEP_LIMIT.value!r} capability (it is not told the limit)")
    tools = declared_tools_of(adapter)
    if tools is not None:
        problem = tool_misfit(scenario, tools, agent_label(adapter))
        if problem is not None:
            out.append(problem)
    return out


def unmet(adapter: Adapter, scenarios: Iterable[Scenario]) -> list[str]:
    """One sentence per reason any of the scenarios cannot run against the agent."""
    return [reason for s in scenarios for reason in misfit(adapter, s)]
