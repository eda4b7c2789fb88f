"""`crashmatrix bench --memory-cases N`: the harness's memory over a long `--states` run, sampled as it goes.

Crash states keep snapshots on disk and shared recoveries in memory until no case of their
scenario is left to run (crash_states.py). This runs the bench's scenarios at depth 2 with
`--states`, again and again until N cases have finished, and samples the harness's resident set
every `SAMPLE_EVERY` cases: flat samples say nothing accumulates across cases, the snapshot
directory left empty says every snapshot was deleted.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.runner import RunnerConfig
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.scenarios.model import Scenario

SAMPLE_EVERY = 500
DEPTH = 2


@dataclass
class MemoryFigures:
    cases: int = 0
    runs: int = 0
    sample_every: int = SAMPLE_EVERY
    samples_mb: list[float] = field(default_factory=list)  # resident set every `sample_every` cases
    states_left_bytes: int = 0  # what the snapshot directory held after the last run

    def to_json(self) -> dict[str, object]:
        # ru_maxrss is in KiB on Linux, and covers the whole bench process up to now.
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        first, last = (self.samples_mb[0], self.samples_mb[-1]) if self.samples_mb else (0.0, 0.0)
        return {"cases": self.cases, "depth": DEPTH, "runs": self.runs, "sample_every": self.sample_every,
                "rss_samples_mb": self.samples_mb, "rss_growth_mb": round(last - first, 1),
                "peak_rss_mb": round(peak, 1), "states_left_bytes": self.states_left_bytes}


def measure_memory(scenarios: list[Scenario], runner_config: RunnerConfig, jobs: int, target: int,
                   sample_every: int = SAMPLE_EVERY) -> MemoryFigures:
    """Run `--states --depth 2` matrices until `target` cases have finished."""
    figures = MemoryFigures(sample_every=sample_every)
    me = psutil.Process()

    def on_result(_result: CaseResult, _known: int) -> None:
        figures.cases += 1
        if figures.cases % figures.sample_every == 0:
            figures.samples_mb.append(round(me.memory_info().rss / 2**20, 1))

    while figures.cases < target:
        matrix = Matrix(MatrixConfig(scenarios=scenarios, runner=runner_config, depth=DEPTH, jobs=jobs,
                                     states=True))
        before = figures.cases
        matrix.run(on_result)
        figures.runs += 1
        if matrix.states is not None:
            figures.states_left_bytes = _bytes_under(matrix.states.root)
        if figures.cases == before:
            break  # a matrix of no cases never reaches the target
    return figures


def _bytes_under(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0
