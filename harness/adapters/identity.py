"""Which agent a run tested, as its reports name it: the name given, where its adapter comes from
(the module and the installed distribution with its version) and the framework it hosts."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass

from crashmatrix.harness.adapters.interface import profile_of


@dataclass(frozen=True)
class AgentIdentity:
    name: str
    origin: str  # `module.Class` of the adapter, with the distribution that installed it
    framework: str | None  # "LangGraph 1.2.3": the framework and version hosted, when it says


def _named_alike(top: str) -> list[str]:
    """The distribution named as the package is, when it says it installs that package: found at
    once, where `packages_distributions` reads every installed distribution's file list (0.2 to
    0.3 s of each `run` and `repro` in an environment with a framework or two)."""
    try:
        dist = importlib.metadata.distribution(top)
        listed = (dist.read_text("top_level.txt") or "").split()
        files = [] if listed else [f.parts[0] for f in dist.files or [] if f.parts]
    except Exception:  # not installed under that name, or its metadata is broken
        return []
    return [dist.metadata["Name"]] if top in listed or top in files else []


def _distribution(module: str) -> str | None:
    top = module.split(".", 1)[0]
    try:
        dists = _named_alike(top) or importlib.metadata.packages_distributions().get(top, [])
    except Exception:  # metadata of some installed package is broken: no name then
        return None
    for dist in dists:
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def identity(name: str, adapter: object) -> AgentIdentity:
    kind = type(adapter)
    origin = f"{kind.__module__}.{kind.__qualname__}"
    dist = _distribution(kind.__module__)
    profile = profile_of(adapter)
    framework = f"{profile.framework} {profile.version}".strip() if profile is not None else None
    return AgentIdentity(name, f"{origin} ({dist})" if dist else origin, framework or None)
