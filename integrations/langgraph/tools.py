"""The tools a LangGraph app offers its model, read from its compiled graph (the host's `describe`).

The tools are those of the graph's `ToolNode`s (in subgraphs too): what runs when the model asks
for a tool by name. Each is described as `bind_tools` sends it to the model
(`convert_to_openai_tool`), so the arguments schema leaves out what LangGraph injects
(`InjectedToolCallId`, `InjectedState`, ...): the model never supplies those, and neither does a
scenario. A graph that runs its tools without a `ToolNode` is read from the chat model a node
calls, when that model was bound with tools (`model.bind_tools(...)`) and the node's function
holds it in a closure or a module global: the same wire descriptions, found one step less
directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.runnables import RunnableBinding, RunnableSequence
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel


def graph_tools(graph: Any) -> list[dict[str, Any]]:
    """`{"name", "parameters", "description"}` of every tool the graph can run, by first
    appearance (a name is described once)."""
    found: dict[str, dict[str, Any]] = {}
    for tool in _tool_node_tools(graph):
        found.setdefault(tool.name, _described(convert_to_openai_tool(tool)))
    if not found:
        for wire in _bound_model_tools(graph):
            described = _described(wire)
            found.setdefault(described["name"], described)
    return list(found.values())


def _described(openai_tool: dict[str, Any]) -> dict[str, Any]:
    function = openai_tool.get("function", openai_tool)
    return {"name": function["name"], "parameters": function.get("parameters"),
            "description": function.get("description") or ""}


def _nodes(graph: Any, seen: set[int] | None = None) -> Iterator[Any]:
    """What each node of `graph` runs (`PregelNode.bound`), descending into subgraphs."""
    seen = set() if seen is None else seen
    if id(graph) in seen:
        return
    seen.add(id(graph))
    for node in getattr(graph, "nodes", {}).values():
        bound = getattr(node, "bound", node)
        yield bound
        if isinstance(bound, Pregel):
            yield from _nodes(bound, seen)


def _tool_node_tools(graph: Any) -> Iterator[BaseTool]:
    for bound in _nodes(graph):
        if isinstance(bound, ToolNode):
            yield from bound.tools_by_name.values()


def _bound_model_tools(graph: Any) -> Iterator[dict[str, Any]]:
    """The OpenAI-format tools of models bound with tools that a node's function refers to."""
    for bound in _nodes(graph):
        for func in (getattr(bound, "func", None), getattr(bound, "afunc", None)):
            for value in _referenced(func):
                yield from _binding_tools(value)


def _referenced(func: Any) -> Iterator[Any]:
    """The values a function closes over, and the module globals its code names."""
    for cell in getattr(func, "__closure__", None) or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue
    code, globals_ = getattr(func, "__code__", None), getattr(func, "__globals__", None)
    if code is not None and isinstance(globals_, dict):
        yield from (globals_[name] for name in code.co_names if name in globals_)


def _binding_tools(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, RunnableSequence):
        for step in value.steps:
            yield from _binding_tools(step)
    elif isinstance(value, RunnableBinding):
        for tool in value.kwargs.get("tools") or ():
            if isinstance(tool, dict) and "function" in tool:
                yield tool
