"""The framework integrations read a hosted app's tools by loading it in the host (`describe`): the
shipped examples' tools with their argument schemas, the support apps' tools without what the
framework injects (a tool-call id, a tool context), and an app that does not import refused with
its traceback before any case."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.adapters.interface import PreflightError, ToolSpec
from crashmatrix.integrations.hosting import HostedAdapter
from crashmatrix.integrations.langgraph.adapter import ADAPTER as LANGGRAPH
from crashmatrix.integrations.openai_agents.adapter import ADAPTER as OPENAI_AGENTS
from tests.support.frameworks import ROOT

pytestmark = pytest.mark.crash
SUPPORT_APP = ROOT / "examples" / "support_app"

# Skipped where the extra is not installed (the reason says so in pytest's summary); never in CI
# (`CI` set, as .ci/run sets it): there a missing framework fails the tests.
needs_langgraph = pytest.mark.skipif(
    importlib.util.find_spec("langgraph") is None and not os.environ.get("CI"),
    reason="LangGraph is not installed (pip install -e '.[langgraph]')")
needs_sdk = pytest.mark.skipif(
    importlib.util.find_spec("agents") is None and not os.environ.get("CI"),
    reason="the OpenAI Agents SDK is not installed (pip install -e '.[openai-agents]')")

# The shipped examples' tools and the arguments each takes (all strings, all required).
EXAMPLE_ARGS = {"read": ["path"], "append_note": ["path", "line"], "bash": ["command"]}
SUPPORT_ARGS = {"lookup_order": ["order_id"], "send_email": ["to", "subject", "body"]}


def arguments(tools: tuple[ToolSpec, ...]) -> dict[str, list[str]]:
    """tool -> its required arguments, checking that each is a string in an object schema."""
    found = {}
    for tool in tools:
        schema = tool.parameters
        assert schema is not None, tool
        assert schema["type"] == "object", tool
        assert all(p["type"] == "string" for p in schema["properties"].values()), tool
        assert sorted(schema["required"]) == sorted(schema["properties"]), tool
        assert tool.policy is None, tool  # a framework declares no replay policy
        assert tool.description, tool
        found[tool.name] = list(schema["required"])
    return found


@needs_langgraph
def test_the_langgraph_example_declares_its_tools() -> None:
    assert arguments(tuple(LANGGRAPH.declared_tools())) == EXAMPLE_ARGS


@needs_sdk
def test_the_agents_sdk_example_declares_its_tools() -> None:
    assert arguments(tuple(OPENAI_AGENTS.declared_tools())) == EXAMPLE_ARGS


@pytest.mark.parametrize(("adapter", "app"), [
    pytest.param(LANGGRAPH, "support_lg.broken:build", marks=needs_langgraph),
    pytest.param(LANGGRAPH, "support_lg.fixed:build", marks=needs_langgraph),
    pytest.param(OPENAI_AGENTS, "support_agents.broken:build", marks=needs_sdk),
    pytest.param(OPENAI_AGENTS, "support_agents.fixed:build", marks=needs_sdk),
])
def test_the_support_apps_declare_what_the_model_supplies(
        adapter: HostedAdapter, app: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A user's app is found from where crashmatrix runs. The fixed tools take the tool call's id
    # (InjectedToolCallId, ToolContext): the framework passes it, so the schema leaves it out.
    monkeypatch.chdir(SUPPORT_APP)
    assert arguments(adapter.with_app(app).declared_tools()) == SUPPORT_ARGS


@needs_langgraph
def test_describe_prints_one_json_line_and_writes_nowhere(tmp_path: Path) -> None:
    before = sorted(p.name for p in SUPPORT_APP.iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "crashmatrix.integrations.langgraph.host", "--app",
         "support_lg.fixed:build", "--path", str(SUPPORT_APP), "describe"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [t["name"] for t in json.loads(done.stdout)["tools"]] == ["lookup_order", "send_email"]
    assert list(tmp_path.iterdir()) == []
    assert sorted(p.name for p in SUPPORT_APP.iterdir()) == before


@pytest.mark.parametrize("adapter", [
    pytest.param(LANGGRAPH, marks=needs_langgraph),
    pytest.param(OPENAI_AGENTS, marks=needs_sdk),
])
def test_an_app_that_does_not_import_is_refused_with_its_traceback(adapter: HostedAdapter) -> None:
    with pytest.raises(PreflightError) as caught:
        adapter.with_app("nosuchmod:build").declared_tools()
    message = str(caught.value)
    assert message.startswith(f"agent '{adapter.name}:nosuchmod:build' does not load: "
                              "the app 'nosuchmod:build' failed"), message
    assert "describe exited 1" in message
    assert "ModuleNotFoundError: No module named 'nosuchmod'" in message


@needs_langgraph
def test_run_refuses_an_app_that_does_not_import_before_any_case(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "crashmatrix", "run", "--agent", "langgraph:nosuchmod:build",
         "--scenario", "changelog", "--out", str(tmp_path / "out")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stdout + done.stderr[-3000:]
    assert "ModuleNotFoundError: No module named 'nosuchmod'" in done.stderr
    assert not (tmp_path / "out" / "results.jsonl").exists()
