"""The agent adapters registered under the entry-point group `crashmatrix.adapters`."""

from __future__ import annotations

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.plugins import ADAPTERS_GROUP, ExtensionPoint
from crashmatrix.harness.records.results import DEFAULT_AGENT

__all__ = ["ADAPTERS", "DEFAULT_AGENT"]

ADAPTERS: ExtensionPoint[Adapter] = ExtensionPoint(ADAPTERS_GROUP, "agent")
