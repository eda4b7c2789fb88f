"""What the adapter and the host agree on: which agent, where the example lives, the environment."""

from __future__ import annotations

from pathlib import Path

APP_ENV = "CRASHMATRIX_PYDANTIC_AI_DBOS_APP"  # MODULE:ATTR of the user's DBOSAgent (or its factory)
DEFAULT_APP = "changelog_dbos.agent:agent"  # the shipped example
# examples/pydantic_ai_dbos_app in a checkout (crashmatrix/integrations links to ../integrations).
EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "pydantic_ai_dbos_app"
HOST = "crashmatrix.integrations.pydantic_ai_dbos.host"
# Every hosted run's environment: whatever the caller's shell holds, a hosted run must reach
# nothing but the harness's fake provider (OPENAI_BASE_URL, set per incarnation by the host).
# DBOS talks to a conductor or its cloud only when told to (a conductor key, DBOS__CLOUD) and
# exports traces only with enable_otlp, which the host's config leaves off; Pydantic AI's
# instrumentation goes through logfire-api, a no-op unless logfire itself is configured.
QUIET_ENV = {
    "OPENAI_API_KEY": "sk-crashmatrix-fake",  # the client refuses to start without one; never a real one
    "DBOS__CLOUD": "false",
    "DBOS__CONDUCTOR_KEY": "",
    "OTEL_SDK_DISABLED": "true",
    "OTEL_TRACES_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
    "OTEL_METRICS_EXPORTER": "none",
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
    "LOGFIRE_IGNORE_NO_CONFIG": "1",
}
