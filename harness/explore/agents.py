"""Which agent an exploration runs: a registered adapter, or a mutant of our agent."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, cast

from crashmatrix.harness.adapter import ADAPTERS, Adapter

DEFAULT_AGENT = "durable-agent"
# The mutant catalogue is optional (and built apart from explore): it is found by name, and
# explore works without it.
MUTANTS = "crashmatrix.harness.mutants"
MUTANT_ADAPTER = ("crashmatrix.harness.mutants", "crashmatrix.harness.mutants.adapter")
MUTANT_NAMES = "crashmatrix.harness.mutants.catalogue"


class AgentChoiceError(ValueError):
    """An unknown agent or mutant name (a usage error)."""


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _mutant_adapter(mutant: str) -> Adapter:
    if _module(MUTANTS) is None:
        raise AgentChoiceError(f"cannot run mutant {mutant!r}: mutants are not available "
                               f"(no {MUTANTS} package)")
    cls: Any = None
    for where in MUTANT_ADAPTER:
        module = _module(where)
        cls = getattr(module, "MutantAdapter", None) if module is not None else None
        if cls is not None:
            break
    if cls is None:
        raise AgentChoiceError(f"cannot run mutant {mutant!r}: mutants are not available "
                               f"({MUTANTS} has no MutantAdapter)")
    names: Any = getattr(_module(MUTANT_NAMES), "MutantName", None)
    name: Any = mutant
    if names is not None:
        try:
            name = names(mutant)
        except ValueError:
            known = ", ".join(n.value for n in names)
            raise AgentChoiceError(f"unknown mutant {mutant!r}; known: {known}") from None
    try:
        return cast(Adapter, cls(name))
    except (LookupError, ValueError) as exc:
        raise AgentChoiceError(f"unknown mutant {mutant!r}: {exc}") from None


def resolve_adapter(agent: str, mutant: str | None) -> Adapter:
    if mutant is not None:
        return _mutant_adapter(mutant)
    if agent not in ADAPTERS:
        raise AgentChoiceError(f"unknown agent {agent!r}; known: {', '.join(sorted(ADAPTERS))}")
    return ADAPTERS[agent]


def label(agent: str, mutant: str | None) -> str:
    return f"mutant {mutant}" if mutant is not None else f"agent {agent}"
