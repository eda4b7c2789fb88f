"""What the adapter and the host agree on: which workflow factory, where the example is, the environment."""

from __future__ import annotations

from pathlib import Path

APP_ENV = "CRASHMATRIX_AGENT_FRAMEWORK_APP"  # MODULE:ATTR of the user's workflow factory
DEFAULT_APP = "changelog_maf.workflow:build"  # the shipped example
# examples/agent_framework_app in a checkout (crashmatrix/integrations links to ../integrations).
EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "agent_framework_app"
HOST = "crashmatrix.integrations.agent_framework.host"
# Every hosted run's environment: whatever the caller's shell holds, a hosted run must reach
# nothing but the harness's fake provider (OPENAI_BASE_URL, set per incarnation by the host).
# Agent Framework instruments with OpenTelemetry by default and reads exporter endpoints from
# the environment: instrumentation and every exporter off.
QUIET_ENV = {
    "OPENAI_API_KEY": "sk-crashmatrix-fake",  # the client refuses to start without one; never a real one
    "AZURE_OPENAI_API_KEY": "crashmatrix-fake",
    "ENABLE_INSTRUMENTATION": "false",
    "ENABLE_SENSITIVE_DATA": "false",
    "ENABLE_CONSOLE_EXPORTERS": "false",
    "OTEL_SDK_DISABLED": "true",
    "OTEL_TRACES_EXPORTER": "none",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
    "AGENT_FRAMEWORK_USER_AGENT_DISABLED": "true",
}
