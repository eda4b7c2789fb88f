"""What the LangGraph.js adapter and its host agree on: which graph factory, the example, the host."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
APP_ENV = "CRASHMATRIX_LANGGRAPH_JS_APP"  # FILE:EXPORT of the user's graph factory
# examples/langgraph_js_app in a checkout (crashmatrix/integrations links to ../integrations).
EXAMPLE_DIR = HERE.parents[1] / "examples" / "langgraph_js_app"
DEFAULT_APP = f"{EXAMPLE_DIR / 'graph.mjs'}:build"  # the shipped example
HOST = HERE / "host.mjs"
# Every hosted run's environment (the host sets it too, clients/js/host-runtime.js QUIET_ENV):
# whatever the caller's shell holds, a hosted run must reach nothing but the harness's fake
# provider (OPENAI_BASE_URL, set per incarnation by the host). LangChain.js runs callbacks in the
# background unless told not to: the probes are callbacks.
QUIET_ENV = {
    "OPENAI_API_KEY": "sk-crashmatrix-fake",  # clients refuse to start without one; never a real one
    "ANTHROPIC_API_KEY": "sk-ant-crashmatrix-fake",
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGCHAIN_CALLBACKS_BACKGROUND": "false",
}
