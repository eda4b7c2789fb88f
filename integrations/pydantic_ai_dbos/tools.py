"""The tools a Pydantic AI agent offers its model, read from the agent (the host's `describe`).

The tools are those of the agent's function toolsets (its `tools=[...]`, `@agent.tool`
functions and any `FunctionToolset` it was given), each described by its `ToolDefinition` as
Pydantic AI sends it to the model: name, description and the arguments' JSON Schema, which
leaves out a first `RunContext` parameter (Pydantic AI passes it itself). Toolsets that list
their tools only at run time (MCP servers, dynamic toolsets) are not listed: listing them means
connecting to a server or running the agent.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.toolsets import AbstractToolset, FunctionToolset


def agent_tools(agent: Any) -> list[dict[str, Any]]:
    """`{"name", "parameters", "description"}` of every function tool of the agent, by first
    appearance (a name is described once)."""
    found: dict[str, dict[str, Any]] = {}

    def visit(toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, FunctionToolset):
            for tool in toolset.tools.values():
                described = tool.tool_def
                found.setdefault(described.name, {
                    "name": described.name, "parameters": described.parameters_json_schema,
                    "description": described.description or ""})

    for toolset in agent.toolsets:
        toolset.apply(visit)
    return list(found.values())
