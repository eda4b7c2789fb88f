"""Which agent an exploration runs: a registered adapter, or a mutant of our agent."""

from __future__ import annotations

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.adapters.registry import MUTANT_PREFIX, AgentChoiceError, resolve_agent

__all__ = ["AgentChoiceError", "label", "resolve_adapter"]


def resolve_adapter(agent: str, mutant: str | None) -> Adapter:
    """`--mutant NAME` is explore's spelling of `--agent mutant:NAME`."""
    return resolve_agent(agent if mutant is None else MUTANT_PREFIX + mutant)


def label(agent: str, mutant: str | None) -> str:
    return f"mutant {mutant}" if mutant is not None else f"agent {agent}"
