"""The graph: a chat model that calls tools until it answers, with LangGraph's own ToolNode loop.

Nothing here knows about crashmatrix. The model is `ChatOpenAI`, which takes its server from
`OPENAI_BASE_URL` (crashmatrix points it at its fake provider); the tools act on the current
directory. `build(checkpointer)` is the factory the host calls: it compiles the graph with the
checkpointer it is given, as an app would compile it with its own `SqliteSaver`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

OUTPUT_CAP = 16_000  # characters of a command's output the model is shown


@tool
def read(path: str) -> str:
    """Read a text file and return its contents."""
    return Path(path).read_text(encoding="utf-8")


@tool
def append_note(path: str, line: str) -> str:
    """Append one line to a text file (not idempotent: calling it twice appends twice)."""
    with Path(path).open("a", encoding="utf-8") as f:
        f.write(line.rstrip("\n") + "\n")
    return f"appended 1 line to {path}"


@tool
def bash(command: str) -> str:
    """Run a shell command and return its exit code and output."""
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)
    return f"exit code {done.returncode}\n{(done.stdout + done.stderr)[-OUTPUT_CAP:]}"


TOOLS = [read, append_note, bash]


def build(checkpointer: Any = None) -> Any:
    """The compiled graph: `agent` asks the model, `tools` runs the calls it asked for."""
    model = ChatOpenAI(model="gpt-4o-mini", temperature=0).bind_tools(TOOLS)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)
