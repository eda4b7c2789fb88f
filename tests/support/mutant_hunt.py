"""A catalogued mutant ready to hunt: its scenarios and a runner forking it, beside a fake provider."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from crashmatrix.fakes import FakeDownstream, FakeProvider
from crashmatrix.harness.adapters.mutant import MutantAdapter
from crashmatrix.harness.execution.runner import RunnerConfig
from crashmatrix.harness.execution.spawn import SpawnMode
from crashmatrix.harness.execution.spawners import make_spawner
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from crashmatrix.scenarios import load_builtin
from crashmatrix.scenarios.model import Scenario


@contextlib.contextmanager
def mutant_runner(name: MutantName, work_root: Path, *,
                  fsync: bool = False) -> Iterator[tuple[list[Scenario], RunnerConfig]]:
    """The mutant's catalogue scenarios and a runner config for `hunt`, valid inside the block."""
    scenarios = [load_builtin()[s] for s in CATALOGUE[name].scenarios]
    assert MutantAdapter.python is not None
    spawner = make_spawner(SpawnMode.FORK, list(MutantAdapter.python.preload))
    with FakeProvider() as provider, FakeDownstream() as downstream, contextlib.closing(spawner):
        yield scenarios, RunnerConfig(adapter=MutantAdapter(name), provider=provider,
                                      downstream=downstream, work_root=work_root,
                                      spawner=spawner, fsync=fsync)
