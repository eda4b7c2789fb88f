"""Which agent an exploration runs: a registered adapter, or a mutant of our agent."""

from __future__ import annotations

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.adapters.mutant import MutantAdapter
from crashmatrix.harness.adapters.registry import ADAPTERS
from crashmatrix.harness.mutants.catalogue import MutantName
from crashmatrix.harness.plugins import PluginError, UnknownPlugin

__all__ = ["AgentChoiceError", "label", "resolve_adapter"]


class AgentChoiceError(ValueError):
    """An unknown agent or mutant name (a usage error)."""


def resolve_adapter(agent: str, mutant: str | None) -> Adapter:
    if mutant is not None:
        try:
            return MutantAdapter(MutantName(mutant))
        except ValueError:
            known = ", ".join(n.value for n in MutantName)
            raise AgentChoiceError(f"unknown mutant {mutant!r}; known: {known}") from None
    try:
        return ADAPTERS.get(agent)
    except (UnknownPlugin, PluginError) as exc:
        raise AgentChoiceError(str(exc)) from None


def label(agent: str, mutant: str | None) -> str:
    return f"mutant {mutant}" if mutant is not None else f"agent {agent}"
