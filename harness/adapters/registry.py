"""The agent adapters registered under the entry-point group `crashmatrix.adapters`."""

from __future__ import annotations

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.plugins import ADAPTERS_GROUP, ExtensionPoint

ADAPTERS: ExtensionPoint[Adapter] = ExtensionPoint(ADAPTERS_GROUP, "agent")
DEFAULT_AGENT = "durable-agent"
