"""Chooses the spawner for a spawn mode: fresh interpreters, or forks of a zygote."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.execution.fresh import FreshSpawner
from crashmatrix.harness.execution.spawn import Spawner, SpawnMode
from crashmatrix.harness.execution.zygote import Zygote


def make_spawner(mode: SpawnMode, preload: list[str] | None,
                 measure_imports: tuple[Path, str] | None = None) -> Spawner:
    """Fresh interpreters, or a zygote that imported `preload` (measuring that import with
    coverage.py into `measure_imports`, when given); always fresh processes when there is nothing
    to preload (None: an agent the zygote cannot fork, e.g. not written in Python)."""
    if mode is SpawnMode.FRESH or preload is None:
        return FreshSpawner()
    return Zygote(preload, measure_imports)
