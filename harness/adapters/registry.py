"""The agent adapters registered under the entry-point group `crashmatrix.adapters`, and how a
command-line name (`NAME`, `mutant:NAME` or `package.module:attr`) becomes an adapter."""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.adapters.mutant import MutantAdapter
from crashmatrix.harness.mutants.catalogue import MutantName
from crashmatrix.harness.plugins import ADAPTERS_GROUP, ExtensionPoint, PluginError, UnknownPlugin
from crashmatrix.harness.records.results import DEFAULT_AGENT

__all__ = ["ADAPTERS", "DEFAULT_AGENT", "MUTANT_PREFIX", "AgentChoiceError", "AgentInfo", "list_agents",
           "resolve_agent"]

ADAPTERS: ExtensionPoint[Adapter] = ExtensionPoint(ADAPTERS_GROUP, "agent")
# A catalogued mutant of our agent, as results name it (`mutant:rerun-never`).
MUTANT_PREFIX = "mutant:"


class AgentChoiceError(ValueError):
    """An unknown or broken agent name (a usage error); the message says which and what is known."""


# What an object must have to be an adapter (see interface.Adapter).
REQUIRED = ("name", "program", "python", "capabilities", "start_args", "recover_args", "env",
            "declared_branches")


def resolve_agent(name: str) -> Adapter:
    """The adapter `--agent NAME` names: a registered adapter, `mutant:NAME`, or `module:attr`."""
    if ":" in name and not name.startswith(MUTANT_PREFIX):
        return _by_path(name)
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


def _by_path(ref: str) -> Adapter:
    module_name, _, attr = ref.partition(":")
    # Like `python -m`, a module in the current directory is found (a user's own project).
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise AgentChoiceError(f"--agent {ref}: cannot import {module_name!r}: "
                               f"{type(exc).__name__}: {exc}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise AgentChoiceError(f"--agent {ref}: module {module_name!r} has no attribute {attr!r}")
    if isinstance(obj, type):
        obj = obj()
    missing = [member for member in REQUIRED if not hasattr(obj, member)]
    if missing:
        raise AgentChoiceError(f"--agent {ref}: {type(obj).__name__} is not an adapter; it lacks "
                               f"{', '.join(missing)} (see crashmatrix.harness.adapters.interface)")
    return obj  # type: ignore[no-any-return]


@dataclass(frozen=True)
class AgentInfo:
    name: str
    origin: str  # "built-in" or "entry point of DIST"
    value: str  # module:attr
    capabilities: tuple[str, ...]


def list_agents() -> list[AgentInfo]:
    """Every registered adapter, where it came from and what it can do (broken ones included)."""
    out = []
    for ep in ADAPTERS.entries():
        dist = ep.dist.name if ep.dist is not None else "?"
        origin = "built-in" if dist == "crashmatrix" else f"entry point of {dist}"
        try:
            caps = tuple(sorted(c.value for c in ADAPTERS.get(ep.name).capabilities))
        except (PluginError, UnknownPlugin) as exc:
            caps = (f"broken: {exc}",)
        out.append(AgentInfo(ep.name, origin, ep.value, caps))
    return out
