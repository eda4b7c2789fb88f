"""What the Agents SDK (JS) adapter and its host agree on: which agent factory, the example, the host."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
APP_ENV = "CRASHMATRIX_OPENAI_AGENTS_JS_APP"  # FILE:EXPORT of the user's agent factory
# examples/openai_agents_js_app in a checkout (crashmatrix/integrations links to ../integrations).
EXAMPLE_DIR = HERE.parents[1] / "examples" / "openai_agents_js_app"
DEFAULT_APP = f"{EXAMPLE_DIR / 'agent.mjs'}:build"  # the shipped example
HOST = HERE / "host.mjs"
DUMP_TIMEOUT_S = 60.0  # the host's `dump`: load the SDK, read the session; minutes means a hang
# Every hosted run's environment (the host sets it too, clients/js/host-runtime.js QUIET_ENV):
# the SDK exports traces to OpenAI's servers by default; a placeholder key.
QUIET_ENV = {
    "OPENAI_API_KEY": "sk-crashmatrix-fake",  # the client refuses to start without one; never a real one
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "OPENAI_AGENTS_DONT_LOG_MODEL_DATA": "1",
    "OPENAI_AGENTS_DONT_LOG_TOOL_DATA": "1",
}
