"""Chooses the spawner for a spawn mode: fresh interpreters, or forks of a zygote."""

from __future__ import annotations

from crashmatrix.harness.execution.fresh import FreshSpawner
from crashmatrix.harness.execution.spawn import Spawner, SpawnMode
from crashmatrix.harness.execution.zygote import Zygote


def make_spawner(mode: SpawnMode, preload: list[str]) -> Spawner:
    if mode is SpawnMode.FRESH:
        return FreshSpawner()
    return Zygote(preload)
