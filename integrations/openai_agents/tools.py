"""The tools an Agents SDK app offers its model, read from its `Agent` (the host's `describe`).

A function tool is described as the SDK sends it to the model (`name`, `params_json_schema`,
`description`): the schema leaves out a first `RunContextWrapper`/`ToolContext` parameter, which
the SDK passes itself. A hosted tool (web search, file search, ...) has a name but no arguments
schema here. A handoff is a tool to the model too (`transfer_to_<agent>`), and the agent it hands
to brings its own tools, so both are listed; MCP servers' tools are not (listing them means
connecting to the servers).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agents import Agent, FunctionTool, Handoff, handoff


def agent_tools(agent: Agent[Any]) -> list[dict[str, Any]]:
    """`{"name", "parameters", "description"}` of every tool the agent (and the agents it hands
    off to) can call, by first appearance (a name is described once)."""
    found: dict[str, dict[str, Any]] = {}
    for described in _agent_tools(agent, set()):
        found.setdefault(described["name"], described)
    return list(found.values())


def _agent_tools(agent: Agent[Any], seen: set[int]) -> Iterator[dict[str, Any]]:
    if id(agent) in seen:  # handoffs may form a cycle (triage -> billing -> triage)
        return
    seen.add(id(agent))
    for tool in agent.tools:
        if isinstance(tool, FunctionTool):
            yield {"name": tool.name, "parameters": tool.params_json_schema,
                   "description": tool.description}
        else:
            yield {"name": str(getattr(tool, "name", type(tool).__name__)), "parameters": None,
                   "description": ""}
    for target in agent.handoffs:
        described: Handoff[Any, Any] = target if isinstance(target, Handoff) else handoff(target)
        yield {"name": described.tool_name, "parameters": described.input_json_schema,
               "description": described.tool_description}
        if isinstance(target, Agent):
            yield from _agent_tools(target, seen)
