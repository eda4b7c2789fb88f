"""The framework integrations' tool lists: `describe`'s output parsed into ToolSpecs, the adapter's
preflight (a stand-in host that prints, fails or hangs), and the tools read from a LangGraph graph
and an Agents SDK agent built in-process (ToolNode, injected arguments, subgraphs, a bound model,
handoffs)."""

# No `from __future__ import annotations`: the frameworks read the annotations of tools defined
# inside the tests (`Annotated[str, InjectedToolCallId]`, `ToolContext[Any]`), whose names are
# local to the test and could not be resolved from strings.
import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Self

import pytest

from crashmatrix.harness.adapters.interface import PreflightError, ToolSpec
from crashmatrix.integrations import hosting
from crashmatrix.integrations.hosting import HostedAdapter, host_parser, parse_tools

needs_langgraph = pytest.mark.skipif(
    importlib.util.find_spec("langgraph") is None and not os.environ.get("CI"),
    reason="LangGraph is not installed (pip install -e '.[langgraph]')")
needs_sdk = pytest.mark.skipif(
    importlib.util.find_spec("agents") is None and not os.environ.get("CI"),
    reason="the OpenAI Agents SDK is not installed (pip install -e '.[openai-agents]')")

SCHEMA = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


def test_describe_output_becomes_tool_specs_without_policies() -> None:
    out = json.dumps({"tools": [{"name": "send_email", "parameters": SCHEMA, "description": "Email."},
                                {"name": "web_search", "parameters": None}]})
    assert parse_tools("a line the app printed\n" + out + "\n") == (
        ToolSpec("send_email", SCHEMA, None, "Email."), ToolSpec("web_search", None, None, ""))


@pytest.mark.parametrize(("output", "line"), [
    # A forked describe writes stdout and stderr to one stream: what the app wrote to stderr
    # comes after the list, or before it on its line (no newline of its own), or there is no list.
    ('warning\n{"tools": []}\nat exit: closing\n', '{"tools": []}'),
    ('half a warning{"tools": [{"name": "x"}]}\n', '{"tools": [{"name": "x"}]}'),
    ('{"tools": [1]}\n{"tools": []}', '{"tools": []}'),
    ("Traceback (most recent call last):\nModuleNotFoundError\n", ""),
])
def test_the_tool_list_is_found_in_a_stream_with_stderr_in_it(output: str, line: str) -> None:
    assert hosting._tools_line(output) == line


@pytest.mark.parametrize(("stdout", "says"), [
    ("", "empty"),
    ("not json", "Expecting value"),
    ('{"tool": []}', '{"tools": [...]}'),
    ('{"tools": [{"parameters": {}}]}', "without a name"),
    ('{"tools": [{"name": "x", "parameters": []}]}', "JSON Schema object"),
])
def test_a_bad_tool_list_is_named(stdout: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_tools(stdout)


def test_describe_takes_no_positional_arguments_and_run_keeps_its_own() -> None:
    parser = host_parser("host", "NO_SUCH_ENV_FOR_THIS_TEST", "pkg.mod:build")
    described = parser.parse_args(["--app", "a.b:build", "--path", "/p", "describe"])
    assert (described.command, described.app, described.path) == ("describe", "a.b:build", ["/p"])
    ran = parser.parse_args(["run", "s", "w", "http://x", "the task"])
    assert (ran.command, ran.session, ran.task) == ("run", Path("s"), "the task")
    with pytest.raises(SystemExit):
        parser.parse_args(["describe", "extra"])


class StandIn(HostedAdapter):
    """A hosted adapter whose "host" is a Python one-liner (no framework): what `describe` does."""

    name = "stand-in"
    host, preload, app_env, default_app = "unused", (), "CRASHMATRIX_STAND_IN_APP", "pkg.mod:build"
    example_dir, quiet_env = Path("/nonexistent"), {"STAND_IN_QUIET": "1"}

    def __init__(self, code: str, app: str | None = None) -> None:
        super().__init__(app)
        self.code = code
        self.program = (sys.executable, "-c", code)
        self.runs = 0

    def with_app(self, app: str) -> Self:
        return type(self)(self.code, app)

    def _describe(self, command: tuple[str, ...]) -> tuple[ToolSpec, ...]:
        self.runs += 1
        return super()._describe(command)


def test_the_tools_come_from_the_hosts_describe_once() -> None:
    # The child gets the adapter's environment and the flags naming the app, `describe` last.
    code = ("import json, os, sys; assert sys.argv[1:3] == ['--app', 'mine:build'], sys.argv; "
            "assert sys.argv[-1] == 'describe'; assert os.environ['STAND_IN_QUIET'] == '1'; "
            f"print(json.dumps({{'tools': [{{'name': 'send_email', 'parameters': {SCHEMA!r}}}]}}))")
    adapter = StandIn(code).with_app("mine:build")
    assert adapter.declared_tools() == (ToolSpec("send_email", SCHEMA),)
    assert adapter.declared_tools() == (ToolSpec("send_email", SCHEMA),)
    assert adapter.runs == 1


def test_an_app_that_fails_to_load_is_a_preflight_error_with_its_stderr() -> None:
    code = "import sys; print('Traceback ...', file=sys.stderr); import nosuchmod"
    with pytest.raises(PreflightError) as caught:
        StandIn(code).with_app("nosuchmod:build").declared_tools()
    message = str(caught.value)
    assert message.startswith("agent 'stand-in:nosuchmod:build' does not load: the app 'nosuchmod:build'")
    assert "describe exited 1" in message
    assert "ModuleNotFoundError: No module named 'nosuchmod'" in message


def test_garbage_on_stdout_is_a_preflight_error() -> None:
    with pytest.raises(PreflightError, match="printed no tool list"):
        StandIn("print('hello')").declared_tools()


def test_a_hanging_describe_is_killed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hosting, "DESCRIBE_TIMEOUT_S", 0.5)
    code = "import sys, time; print('loading', file=sys.stderr, flush=True); time.sleep(60)"
    with pytest.raises(PreflightError, match=r"took more than 0\.5 s") as caught:
        StandIn(code).declared_tools()
    assert "loading" in str(caught.value)


@needs_langgraph
def test_a_graphs_tools_are_its_tool_nodes_without_injected_arguments() -> None:
    from langchain_core.tools import InjectedToolCallId, tool  # noqa: PLC0415 - the extra
    from langgraph.graph import START, MessagesState, StateGraph  # noqa: PLC0415
    from langgraph.prebuilt import ToolNode  # noqa: PLC0415

    from crashmatrix.integrations.langgraph.tools import graph_tools  # noqa: PLC0415

    @tool
    def send_email(to: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Email a customer."""
        return tool_call_id

    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return order_id

    inner = StateGraph(MessagesState)
    inner.add_node("tools", ToolNode([lookup_order]))
    inner.add_edge(START, "tools")
    outer = StateGraph(MessagesState)
    outer.add_node("tools", ToolNode([send_email]))
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "tools")
    outer.add_edge("tools", "sub")
    found = {t["name"]: t for t in graph_tools(outer.compile())}
    assert set(found) == {"send_email", "lookup_order"}
    assert found["send_email"]["parameters"]["properties"] == {"to": {"type": "string"}}
    assert found["send_email"]["description"] == "Email a customer."


@needs_langgraph
def test_without_a_tool_node_the_bound_models_tools_are_read() -> None:
    from langchain_core.tools import tool  # noqa: PLC0415 - the extra
    from langchain_openai import ChatOpenAI  # noqa: PLC0415
    from langgraph.graph import START, MessagesState, StateGraph  # noqa: PLC0415
    from pydantic import SecretStr  # noqa: PLC0415

    from crashmatrix.integrations.langgraph.tools import graph_tools  # noqa: PLC0415

    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return order_id

    model = ChatOpenAI(model="m", api_key=SecretStr("x"), base_url="http://127.0.0.1:9/v1")
    bound = model.bind_tools([lookup_order])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    assert [t["name"] for t in graph_tools(graph.compile())] == ["lookup_order"]


@needs_sdk
def test_an_agents_tools_leave_out_the_context_and_include_its_handoffs() -> None:
    from agents import Agent, function_tool  # noqa: PLC0415 - the extra
    from agents.tool_context import ToolContext  # noqa: PLC0415

    from crashmatrix.integrations.openai_agents.tools import agent_tools  # noqa: PLC0415

    @function_tool
    def send_email(ctx: ToolContext[Any], to: str) -> str:
        """Email a customer."""
        return ctx.tool_call_id

    @function_tool
    def refund(order_id: str) -> str:
        """Refund an order."""
        return order_id

    billing: Agent[Any] = Agent(name="billing", tools=[refund])
    triage: Agent[Any] = Agent(name="triage", tools=[send_email], handoffs=[billing])
    billing.handoffs = [triage]  # a cycle is listed once
    found = {t["name"]: t for t in agent_tools(triage)}
    assert list(found) == ["send_email", "transfer_to_billing", "refund", "transfer_to_triage"]
    assert set(found["send_email"]["parameters"]["properties"]) == {"to"}
