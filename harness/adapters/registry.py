"""The agent adapters registered under the entry-point group `crashmatrix.adapters`, and how a
command-line name (`NAME`, `mutant:NAME` or `package.module:attr`) becomes an adapter."""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.plugins import ADAPTERS_GROUP, ExtensionPoint, PluginError, UnknownPlugin
from crashmatrix.harness.records.results import DEFAULT_AGENT
from crashmatrix.harness.records.violation import InvariantId

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
    """The adapter `--agent NAME` names: a registered adapter, `mutant:NAME`, `module:attr`, or
    `ADAPTER:APP` for a registered adapter that hosts a user's app (`langgraph:mypkg.graph:build`:
    it offers `with_app`). Its declared exemptions (`not_applicable`) must name invariants."""
    return _checked(name, _resolve(name))


def _resolve(name: str) -> Adapter:
    head, sep, app = name.partition(":")
    if sep and head != MUTANT_PREFIX[:-1] and head in ADAPTERS.names():
        try:
            host = ADAPTERS.get(head)
        except (UnknownPlugin, PluginError) as exc:
            raise AgentChoiceError(str(exc)) from None
        with_app = getattr(host, "with_app", None)
        if with_app is None:
            raise AgentChoiceError(f"--agent {name}: agent {head!r} hosts no app of yours (it has no "
                                   "`with_app`); name it alone")
        if not app:
            raise AgentChoiceError(f"--agent {name}: give the app after the colon, as MODULE:ATTR")
        return with_app(app)  # type: ignore[no-any-return]
    if ":" in name and not name.startswith(MUTANT_PREFIX):
        return _by_path(name)
    if name.startswith(MUTANT_PREFIX):
        # Imported here: the catalogue (and through it the agent's loop) is a cost every command
        # would pay at start, for the few runs that name a mutant.
        from crashmatrix.harness.adapters.mutant import MutantAdapter  # noqa: PLC0415
        from crashmatrix.harness.mutants.catalogue import MutantName  # noqa: PLC0415
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


def _checked(name: str, adapter: Adapter) -> Adapter:
    declared = getattr(adapter, "not_applicable", {})
    known = {i.value for i in InvariantId}
    wrong = sorted(str(k) for k in declared if k not in known)
    if wrong:
        raise AgentChoiceError(f"--agent {name}: its adapter declares not_applicable for "
                               f"{', '.join(map(repr, wrong))}, which name no invariant (known: "
                               f"{', '.join(sorted(known))})")
    return adapter


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
