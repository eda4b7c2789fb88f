"""What the adapter and the host agree on: which agent factory, where the example lives, the environment."""

from __future__ import annotations

from pathlib import Path

APP_ENV = "CRASHMATRIX_OPENAI_AGENTS_APP"  # MODULE:ATTR of the user's agent factory
DEFAULT_APP = "changelog_agents.agent:build"  # the shipped example
# examples/openai_agents_app in a checkout (crashmatrix/integrations links to ../integrations).
EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "openai_agents_app"
HOST = "crashmatrix.integrations.openai_agents.host"
# Every hosted run's environment: whatever the caller's shell holds, a hosted run must reach
# nothing but the harness's fake provider (OPENAI_BASE_URL, set per incarnation by the host).
# The SDK exports traces to OpenAI's servers by default, retrying at every process exit: off.
QUIET_ENV = {
    "OPENAI_API_KEY": "sk-crashmatrix-fake",  # the client refuses to start without one; never a real one
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "OPENAI_AGENTS_DONT_LOG_MODEL_DATA": "1",
    "OPENAI_AGENTS_DONT_LOG_TOOL_DATA": "1",
}
