"""Chooses the spawner for a spawn mode: fresh interpreters, or forks of a zygote."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.execution.fresh import FreshSpawner
from crashmatrix.harness.execution.spawn import Spawner, SpawnMode
from crashmatrix.harness.execution.warm_zygotes import take
from crashmatrix.harness.execution.zygote import Zygote


def make_spawner(mode: SpawnMode, preload: list[str] | None,
                 measure_imports: tuple[Path, str] | None = None) -> Spawner:
    """Fresh interpreters, or a zygote that imported `preload` (measuring that import with
    coverage.py into `measure_imports`, when given); always fresh processes when there is nothing
    to preload (None: an agent the zygote cannot fork, e.g. not written in Python). A zygote
    started to describe the app's tools (warm_zygotes.py) is taken when it preloaded the same."""
    warm = take(preload) if preload is not None else None
    if warm is not None and (mode is SpawnMode.FRESH or measure_imports is not None):
        warm.close()  # not the zygote this run needs: its memory goes now, not at the command's end
        warm = None
    if mode is SpawnMode.FRESH or preload is None:
        return FreshSpawner()
    return warm if warm is not None else Zygote(preload, measure_imports)
