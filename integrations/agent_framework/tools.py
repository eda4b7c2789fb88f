"""The tools an Agent Framework app offers its model, read from its workflow (the host's `describe`).

The tools are the function tools of the agents the workflow's executors run (in sub-workflows
too), as the framework describes them to the model (`FunctionTool.parameters()`, the JSON Schema
of the arguments, which leaves out a `FunctionInvocationContext` parameter the framework passes
itself). Hosted and MCP tools have a name but no arguments schema here (listing an MCP server's
tools means connecting to it, so they are not listed).
"""

from __future__ import annotations

from typing import Any

from agent_framework import FunctionTool

from crashmatrix.integrations.agent_framework.seams import agents_of, tools_of


def workflow_tools(workflow: Any) -> list[dict[str, Any]]:
    """`{"name", "parameters", "description"}` of every tool the workflow's agents can call, by
    first appearance (a name is described once)."""
    found: dict[str, dict[str, Any]] = {}
    for agent in agents_of(workflow):
        for tool in tools_of(agent):
            described: dict[str, Any]
            if isinstance(tool, FunctionTool):
                described = {"name": tool.name, "parameters": tool.parameters(),
                             "description": tool.description or ""}
            elif isinstance(tool, dict) and isinstance(tool.get("name"), str):
                described = {"name": tool["name"], "parameters": None, "description": ""}
            else:
                continue
            found.setdefault(str(described["name"]), described)
    return list(found.values())
