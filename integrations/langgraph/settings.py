"""What the adapter and the host agree on: which graph factory, where the example lives, the environment."""

from __future__ import annotations

from pathlib import Path

APP_ENV = "CRASHMATRIX_LANGGRAPH_APP"  # MODULE:ATTR of the user's graph factory
DEFAULT_APP = "changelog_app.graph:build"  # the shipped example
# examples/langgraph_app in a checkout (crashmatrix/integrations links to ../integrations).
EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "langgraph_app"
HOST = "crashmatrix.integrations.langgraph.host"
# Every hosted run's environment: whatever the caller's shell holds, a hosted run must reach
# nothing but the harness's fake provider (OPENAI_BASE_URL, set per incarnation by the host).
QUIET_ENV = {
    "OPENAI_API_KEY": "sk-crashmatrix-fake",  # clients refuse to start without one; never a real one
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
}
