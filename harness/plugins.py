"""Extension points: named plugins found through entry-point groups, the built-ins included.

crashmatrix's own adapters and fault kinds are registered in its `pyproject.toml` under the same
entry-point groups a third party uses, and are found here the same way: nothing is special about
a built-in except which distribution declares it.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from crashmatrix.harness.records.case import PLUGIN_NAME

T = TypeVar("T")

ADAPTERS_GROUP = "crashmatrix.adapters"
FAULTS_GROUP = "crashmatrix.faults"

# Scanning the installed distributions costs ~80 ms (every matrix, every repro looked its faults
# up again): a scan is kept while sys.path and the modification times of its directories (a
# distribution installed or removed changes its directory's) are what they were.
_scans: dict[str, tuple[tuple[tuple[str, int], ...], dict[str, EntryPoint]]] = {}
_scans_lock = threading.Lock()


def _path_state() -> tuple[tuple[str, int], ...]:
    state = []
    for entry in sys.path:
        try:
            state.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            state.append((entry, -1))
    return tuple(state)


class UnknownPlugin(LookupError):
    """No plugin of that name is registered; the message lists the known ones."""


class PluginError(RuntimeError):
    """A registered plugin could not be loaded, or is not what its group promises."""


@dataclass(frozen=True)
class ExtensionPoint(Generic[T]):
    """One entry-point group: `[project.entry-points."<group>"] <name> = "<module>:<attr>"`.

    The object an entry point names must carry a `name` attribute equal to the entry point's
    name (so a case id or a results file can name it back).
    """

    group: str
    what: str  # for messages: "agent adapter", "fault kind"

    def _entries(self) -> dict[str, EntryPoint]:
        state = _path_state()
        with _scans_lock:
            kept = _scans.get(self.group)
        if kept is not None and kept[0] == state:
            return dict(kept[1])
        found: dict[str, EntryPoint] = {}
        for ep in entry_points(group=self.group):
            # The first distribution on sys.path wins, as for any import.
            found.setdefault(ep.name, ep)
        with _scans_lock:
            _scans[self.group] = (state, found)
        return dict(found)

    def names(self) -> list[str]:
        return sorted(self._entries())

    def entries(self) -> list[EntryPoint]:
        """The registered entry points, by name (not loaded)."""
        entries = self._entries()
        return [entries[name] for name in sorted(entries)]

    def get(self, name: str) -> T:
        entries = self._entries()
        ep = entries.get(name)
        if ep is None:
            known = ", ".join(sorted(entries)) or "none"
            raise UnknownPlugin(f"unknown {self.what} {name!r} (known: {known})")
        return self._load(ep)

    def all(self) -> list[T]:
        """Every registered plugin, sorted by name: a stable order whatever installed them."""
        entries = self._entries()
        return [self._load(entries[name]) for name in sorted(entries)]

    def _load(self, ep: EntryPoint) -> T:
        if not PLUGIN_NAME.match(ep.name):
            raise PluginError(f"{self.what} entry point {ep.name!r} ({ep.value}) in group "
                              f"{self.group!r}: names must match {PLUGIN_NAME.pattern}")
        try:
            obj = ep.load()
        except Exception as exc:
            raise PluginError(f"{self.what} {ep.name!r} ({ep.value}) failed to load: "
                              f"{type(exc).__name__}: {exc}") from exc
        if getattr(obj, "name", None) != ep.name:
            raise PluginError(f"{self.what} {ep.name!r} ({ep.value}) names itself "
                              f"{getattr(obj, 'name', None)!r}; its `name` must be {ep.name!r}")
        return obj  # type: ignore[no-any-return]
