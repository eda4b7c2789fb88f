"""The agent adapters registered under the entry-point group `crashmatrix.adapters`, and how a
command-line name becomes an adapter."""

from __future__ import annotations

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.adapters.mutant import MutantAdapter
from crashmatrix.harness.mutants.catalogue import MutantName
from crashmatrix.harness.plugins import ADAPTERS_GROUP, ExtensionPoint, PluginError, UnknownPlugin
from crashmatrix.harness.records.results import DEFAULT_AGENT

__all__ = ["ADAPTERS", "DEFAULT_AGENT", "MUTANT_PREFIX", "AgentChoiceError", "resolve_agent"]

ADAPTERS: ExtensionPoint[Adapter] = ExtensionPoint(ADAPTERS_GROUP, "agent")
# A catalogued mutant of our agent, as results name it (`mutant:rerun-never`).
MUTANT_PREFIX = "mutant:"


class AgentChoiceError(ValueError):
    """An unknown or broken agent name (a usage error); the message says which and what is known."""


def resolve_agent(name: str) -> Adapter:
    """The adapter `--agent NAME` names: a registered adapter, or `mutant:NAME`."""
    if name.startswith(MUTANT_PREFIX):
        mutant = name.removeprefix(MUTANT_PREFIX)
        try:
            return MutantAdapter(MutantName(mutant))
        except ValueError:
            known = ", ".join(m.value for m in MutantName)
            raise AgentChoiceError(f"unknown mutant {mutant!r}; known: {known}") from None
    try:
        return ADAPTERS.get(name)
    except (UnknownPlugin, PluginError) as exc:
        raise AgentChoiceError(str(exc)) from None
