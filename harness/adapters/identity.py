"""Which agent a run tested, as its reports name it: the name given, where its adapter comes from
(the module and the installed distribution with its version) and the framework it hosts."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from crashmatrix.harness.adapters.interface import profile_of


@dataclass(frozen=True)
class AgentIdentity:
    name: str
    origin: str  # `module.Class` of the adapter, with the distribution that installed it
    framework: str | None  # "LangGraph 1.2.3": the framework and version hosted, when it says


def _holds(dist: str, module: str) -> bool:
    """Whether the installed distribution `dist` holds `module`'s file: listed in its files, or
    (installed editable) under the source directory it was installed from."""
    stem = module.replace(".", "/")
    try:
        found = importlib.metadata.distribution(dist)
        files = {str(f) for f in found.files or []}
    except Exception:  # not installed under that name, or its metadata is broken
        return False
    return f"{stem}.py" in files or f"{stem}/__init__.py" in files or _editable_holds(found, module)


def _editable_holds(dist: importlib.metadata.Distribution, module: str) -> bool:
    """Whether `dist` is an editable install (`pip install -e`, PEP 660: its file list names only
    a path hook, not the modules) of the directory `module`'s imported file lies in. A user's own
    adapter is usually installed so while they work on it."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        url = urlparse(direct["url"])
        editable = bool(direct.get("dir_info", {}).get("editable"))
        where = getattr(sys.modules.get(module), "__file__", None)
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    if not editable or url.scheme != "file" or where is None:
        return False
    return Path(where).resolve().is_relative_to(Path(unquote(url.path)).resolve())


def _named_alike(module: str) -> list[str]:
    """The distribution named as the module's top package is, when it holds the module: found at
    once, where `packages_distributions` reads every installed distribution's file list (0.2 to
    0.3 s of each `run` and `repro` beside a framework or two)."""
    top = module.split(".", 1)[0]
    return [importlib.metadata.distribution(top).metadata["Name"]] if _holds(top, module) else []


def _distribution(module: str) -> str | None:
    top = module.split(".", 1)[0]
    try:
        # A top package several distributions share (langgraph: langgraph, langgraph-prebuilt,
        # the checkpoint savers) is credited to the one holding the module, not to whichever
        # comes first; the one named alike was found holding it already.
        dists = _named_alike(module) or sorted(importlib.metadata.packages_distributions().get(top, []),
                                               key=lambda d: not _holds(d, module))
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
