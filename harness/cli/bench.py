"""`crashmatrix bench`: the same matrix with fresh interpreters and with the zygote, side by side.

Figures are ratios measured in one invocation (the machines are shared and noisy): cases/s and
ms per case for each spawn mode, their ratio, the measured floor (a bare fork, exit and wait,
times the incarnations per case), per-case cost as a multiple of that floor, and peak memory.
With `--trace`, the fresh matrix again with every incarnation under strace (as the power fault
runs the incarnation it crashes), and its cost as a multiple of plain fresh. Per incarnation, the
median time of the settle runs (the last `recover`, nothing left to do) beside the others': a host
that checks its session before loading its framework settles at process-start cost.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import click
import psutil
from tabulate import tabulate

from crashmatrix.harness.adapters.durable import ENTRY as DURABLE_ENTRY
from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.adapters.registry import DEFAULT_AGENT
from crashmatrix.harness.cli.bench_memory import MemoryFigures, measure_memory
from crashmatrix.harness.cli.matrix_setup import (
    adapter_named,
    need_tracer,
    require_fit,
    runner_config,
    scenarios_named,
)
from crashmatrix.harness.execution.crash_states import CrashStates
from crashmatrix.harness.execution.line_coverage import combine_and_report
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.observed import TracedSpawner
from crashmatrix.harness.execution.spawn import Launch, Process, SpawnMode
from crashmatrix.harness.records.results import DEFAULT_TIMEOUT_S, CaseResult
from crashmatrix.scenarios.model import Scenario


@dataclass
class ModeFigures:
    cases: int
    seconds: float
    incarnations: int
    failed: int
    rss_after_mb: list[float]
    combine_s: float = 0.0  # --line-coverage: combining the data files and writing the HTML
    verdicts: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # case -> verdict
    points: int = 0  # --states: crash points started from states
    distinct: int = 0  # --states: the distinct states they mapped to
    frozen: int = 0  # --states: FREEZE (second-process) points served by hosts
    hosts: int = 0  # --states: the host runs made for them
    primed: int = 0  # --states: of the distinct states, those recovered while their recording ran
    settle_ms: list[float] = field(default_factory=list)  # each settle incarnation's time
    other_ms: list[float] = field(default_factory=list)  # every other incarnation's
    harness_cpu_s: float = 0.0  # CPU time of the harness process (every thread) while it ran
    agents_cpu_s: float = 0.0  # of every process it started (agents, zygotes, tracers), reaped or not
    cores: int = 1  # what the matrix's jobs could use: min(jobs, CPUs)

    def cpu(self) -> dict[str, float | None]:
        """Where the matrix's CPU went, per case: the harness's and its agents'; how many cores
        they kept busy between them; and the most cases/s the agents' own CPU allows on the
        cores `jobs` can use, were the harness free."""
        if not self.cases or not self.seconds:
            return {"harness_ms_per_case": None, "agents_ms_per_case": None, "cores_busy": None,
                    "agents_bound_cases_per_s": None}
        agents_ms = 1000 * self.agents_cpu_s / self.cases
        return {"harness_ms_per_case": round(1000 * self.harness_cpu_s / self.cases, 2),
                "agents_ms_per_case": round(agents_ms, 2),
                "cores_busy": round((self.harness_cpu_s + self.agents_cpu_s) / self.seconds, 2),
                "agents_bound_cases_per_s": round(1000 * self.cores / agents_ms, 1) if agents_ms else None}

    @property
    def cases_per_s(self) -> float:
        return self.cases / self.seconds if self.seconds else 0.0

    @property
    def ms_per_case(self) -> float:
        return 1000 * self.seconds / self.cases if self.cases else 0.0


def peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux: the harness process itself (agents are other processes).
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> tuple[float, float]:
    """CPU time so far of this process, and of every process it started: those it reaped
    (RUSAGE_CHILDREN), and those alive with what they reaped (a zygote's forked agents are its
    children, not ours). Read between matrices, when no agent is in flight, the difference of two
    readings splits a matrix's CPU between harness and agents."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    theirs = reaped.ru_utime + reaped.ru_stime
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            t = child.cpu_times()
            theirs += t.user + t.system + t.children_user + t.children_system
    return me.ru_utime + me.ru_stime, theirs


def fork_floor_ms(samples: int = 200) -> float:
    """The cheapest possible incarnation: fork, exit at once, wait. Measured before any thread."""
    started = time.perf_counter()
    for _ in range(samples):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    return 1000 * (time.perf_counter() - started) / samples


@contextmanager
def cached_bytecode(package: str) -> Iterator[bool]:
    """Let the agents cache bytecode while benchmarking, as a default Python does.

    With PYTHONDONTWRITEBYTECODE set (this machine and some CI images set it), a fresh
    interpreter compiles every module without cached bytecode on every start: the agent's own
    modules (an editable install never got any), so fresh mode would be charged for compiling
    and the ratio inflated. For the bench's duration the variable is unset in the agents'
    environment (they write and reuse `__pycache__` like a default Python) and the package is
    compiled before anything is timed. A scenario command that sets the variable itself keeps
    it. Yields whether it had to intervene.
    """
    value = os.environ.get("PYTHONDONTWRITEBYTECODE")
    if not value:
        yield False
        return
    try:
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            subprocess.run([sys.executable, "-m", "compileall", "-q", location], check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        yield True
    finally:
        os.environ["PYTHONDONTWRITEBYTECODE"] = value


class EveryIncarnationTraced:
    """Fresh processes, each under strace writing to a file of its own in `folder`."""

    mode = SpawnMode.FRESH

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0

    def spawn(self, launch: Launch, probe_fds: tuple[int, int]) -> Process:
        self.count += 1  # spawned from case threads: a name is unique enough with the thread's id
        name = f"{self.count}-{threading.get_ident()}.strace"
        return TracedSpawner(self.folder / name).spawn(launch, probe_fds)

    def close(self) -> None:
        pass


def measure(mode: str, names: tuple[str, ...], jobs: int, repeat: int, timeout: float,
            dirs: tuple[str, ...] = (), agent: str = DEFAULT_AGENT,
            line_coverage: bool = False, traced: bool = False, states: bool = False) -> ModeFigures:
    """`line_coverage`: as `run --line-coverage` does it, including combining the data and
    writing the HTML at the end (timed apart, in `combine_s`). `traced`: every incarnation a
    fresh process under strace."""
    scenarios = scenarios_named(names, dirs)
    adapter = adapter_named(agent)
    require_fit(adapter, scenarios)
    figures = ModeFigures(0, 0.0, 0, 0, [])
    with tempfile.TemporaryDirectory(prefix="crashmatrix-bench-") as tmp:
        coverage_dir = Path(tmp) / "coverage-data" if line_coverage else None
        if coverage_dir is not None:
            coverage_dir.mkdir()
        tracer = EveryIncarnationTraced(Path(tmp)) if traced else None
        _measure(figures, mode, scenarios, jobs, repeat, timeout, agent, adapter, coverage_dir, tracer,
                 states)
        if coverage_dir is not None:
            started = time.perf_counter()
            combine_and_report(coverage_dir, Path(tmp))
            figures.combine_s = time.perf_counter() - started
    return figures


def _measure(figures: ModeFigures, mode: str, scenarios: list[Scenario], jobs: int, repeat: int,
             timeout: float, agent: str, adapter: Adapter, coverage_dir: Path | None,
             tracer: EveryIncarnationTraced | None = None, states: bool = False) -> None:

    def on_result(result: CaseResult, known: int) -> None:
        figures.cases += 1
        figures.incarnations += len(result.crashed_at)
        figures.failed += 0 if result.ok else 1
        figures.verdicts[result.case] = (result.verdict.value, tuple(result.invariants))
        # The settle is the incarnation after the one that finished the work (runner.py).
        settles = len(result.incarnation_ms) == result.depth + 2
        figures.settle_ms += result.incarnation_ms[-1:] if settles else []
        figures.other_ms += result.incarnation_ms[:-1] if settles else result.incarnation_ms

    with runner_config(agent, timeout, False, False, mode, resolved=adapter,
                       coverage_dir=coverage_dir) as plain:
        cfg = plain if tracer is None else replace(plain, spawner=tracer)
        for _ in range(repeat):
            matrix = Matrix(MatrixConfig(scenarios=scenarios, runner=cfg, depth=1, jobs=jobs, states=states))
            own, theirs = cpu_seconds()
            started = time.perf_counter()
            matrix.run(on_result)
            figures.seconds += time.perf_counter() - started
            own_after, theirs_after = cpu_seconds()
            figures.harness_cpu_s += own_after - own
            figures.agents_cpu_s += theirs_after - theirs
            figures.cores = min(jobs, os.cpu_count() or 1)
            figures.rss_after_mb.append(round(peak_rss_mb(), 1))
            if matrix.states is not None:
                figures.points += sum(matrix.states.tally.points.values())
                figures.distinct += sum(matrix.states.tally.distinct.values())
                figures.frozen += sum(matrix.states.tally.frozen.values())
                figures.hosts += sum(matrix.states.tally.hosts.values())
                figures.primed += sum(matrix.states.tally.primed.values())


def _memory(names: tuple[str, ...], dirs: tuple[str, ...], jobs: int, timeout: float, agent: str,
            target: int) -> MemoryFigures | None:
    """`--memory-cases`: for an agent `--states` can run (else None)."""
    adapter = adapter_named(agent)
    if not CrashStates.supported(adapter.capabilities):
        return None
    scenarios = scenarios_named(names, dirs)
    with runner_config(agent, timeout, False, False, "fork", resolved=adapter) as cfg:
        return measure_memory(scenarios, cfg, jobs, target)


def coverage_cost(covered: ModeFigures, fork: ModeFigures) -> dict[str, object]:
    """The cost of --line-coverage, measured beside `fork` in the same run: time per case as a
    multiple of fork's, then with combining the data and writing the HTML added."""
    def times(ms: float) -> float | None:
        return round(ms / fork.ms_per_case, 2) if fork.ms_per_case else None

    return {"cases_per_s": round(covered.cases_per_s, 2), "ms_per_case": round(covered.ms_per_case, 2),
            "combine_s": round(covered.combine_s, 2), "overhead": times(covered.ms_per_case),
            "overhead_with_report": times(1000 * (covered.seconds + covered.combine_s) / covered.cases)
            if covered.cases else None}


def incarnation_cost(fig: ModeFigures) -> dict[str, float | None]:
    """Median ms of a settle incarnation and of any other, as the matrix measured them."""
    def median(ms: list[float]) -> float | None:
        return round(statistics.median(ms), 1) if ms else None

    return {"settle_median_ms": median(fig.settle_ms), "other_median_ms": median(fig.other_ms)}


def states_cost(states: ModeFigures, fork: ModeFigures) -> dict[str, object]:
    """--states beside plain fork in the same run: throughput ratio, the states, and whether every
    case got the same verdict (and violated invariants) both ways."""
    return {"cases_per_s": round(states.cases_per_s, 2), "ms_per_case": round(states.ms_per_case, 2),
            "vs_fork": round(states.cases_per_s / fork.cases_per_s, 2) if fork.cases_per_s else None,
            "points": states.points, "distinct_states": states.distinct,
            "second_process_points": states.frozen, "hosts": states.hosts, "primed": states.primed,
            "same_verdicts": states.verdicts == fork.verdicts, "cpu": states.cpu()}


def trace_cost(traced: ModeFigures, fresh: ModeFigures) -> dict[str, float | None]:
    """The cost of observing with strace, measured beside plain fresh spawning in the same run."""
    return {"cases_per_s": round(traced.cases_per_s, 2), "ms_per_case": round(traced.ms_per_case, 2),
            "overhead": round(traced.ms_per_case / fresh.ms_per_case, 2) if fresh.ms_per_case else None}


@click.command("bench")
@click.option("--scenario", "names", multiple=True, default=("changelog-fast",), show_default=True)
@click.option("--scenarios", "dirs", multiple=True, metavar="DIR",
              type=click.Path(file_okay=False), help="Also load scenarios from DIR.")
@click.option("--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(1, 1000),
              help="Run the fork-mode (and --states) matrix this many times (a long run shows memory "
                   "stays flat).")
@click.option("--skip-fresh", is_flag=True, help="Measure only the zygote (for long memory runs).")
@click.option("--timeout", default=DEFAULT_TIMEOUT_S, show_default=True, metavar="S")
@click.option("--agent", default=DEFAULT_AGENT, show_default=True,
              help="Agent under test (as for run); one without a Python entry is never forked.")
@click.option("--line-coverage", is_flag=True,
              help="Also run the fork-mode matrix under --line-coverage, and print its cost.")
@click.option("--trace", is_flag=True,
              help="Also run the fresh matrix with every incarnation under strace (the power "
                   "fault's observation), and print its cost as a multiple of plain fresh.")
@click.option("--memory-cases", default=0, show_default=True, type=click.IntRange(0), metavar="N",
              help="Then run the scenarios at --depth 2 with --states until N cases have finished, "
                   "sampling the harness's resident set every 500 cases (memory stays flat).")
@click.option("--json", "as_json", is_flag=True)
def bench(names: tuple[str, ...], dirs: tuple[str, ...], jobs: int, repeat: int, skip_fresh: bool,
          timeout: float, agent: str, line_coverage: bool, trace: bool, memory_cases: int,
          as_json: bool) -> None:
    """Measure fresh-interpreter and zygote spawning, and --states, on the same matrix, side by side."""
    floor_fork = fork_floor_ms()
    with cached_bytecode(DURABLE_ENTRY.module) as bytecode_cached:
        if trace:
            need_tracer(("power",))
        fresh = None if skip_fresh and not trace else measure("fresh", names, jobs, 1, timeout, dirs, agent)
        traced = measure("fresh", names, jobs, 1, timeout, dirs, agent, traced=True) if trace else None
        fork = measure("fork", names, jobs, repeat, timeout, dirs, agent)
        # Crash states (`run --states`) beside plain fork, on the same matrix, for an agent that
        # declares its recovery reads only its case tree.
        states = (measure("fork", names, jobs, repeat, timeout, dirs, agent, states=True)
                  if CrashStates.supported(adapter_named(agent).capabilities) else None)
        covered = (measure("fork", names, jobs, 1, timeout, dirs, agent, line_coverage=True)
                   if line_coverage else None)
        memory = _memory(names, dirs, jobs, timeout, agent, memory_cases) if memory_cases else None
    per_case_incarnations = fork.incarnations / fork.cases if fork.cases else 0.0
    floor_ms = floor_fork * per_case_incarnations
    data = {
        "cases": fork.cases,
        "fresh": None if fresh is None else {"cases_per_s": round(fresh.cases_per_s, 2),
                                             "ms_per_case": round(fresh.ms_per_case, 2)},
        "fork": {"cases_per_s": round(fork.cases_per_s, 2), "ms_per_case": round(fork.ms_per_case, 2),
                 "cpu": fork.cpu()},
        "ratio": None if fresh is None or not fresh.cases_per_s
        else round(fork.cases_per_s / fresh.cases_per_s, 2),
        "floor_ms": round(floor_ms, 3),
        "floor_multiple": round(fork.ms_per_case / floor_ms, 1) if floor_ms else None,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "jobs": jobs,
        "incarnations_per_case": round(per_case_incarnations, 2),
        "incarnation_ms": incarnation_cost(fork),
        "rss_after_each_repeat_mb": fork.rss_after_mb,
        "failed": fork.failed + (fresh.failed if fresh else 0) + (covered.failed if covered else 0)
        + (traced.failed if traced else 0) + (states.failed if states else 0),
        "bytecode_cached": bytecode_cached,
        "line_coverage": None if covered is None else coverage_cost(covered, fork),
        "trace": None if traced is None or fresh is None else trace_cost(traced, fresh),
        "states": None if states is None else states_cost(states, fork),
        "memory": None if memory is None else memory.to_json(),
    }
    if as_json:
        click.echo(json.dumps(data))
    else:
        rows = []
        for name, fig in (("fresh", fresh), ("fresh under strace", traced), ("fork", fork),
                          ("fork --states", states), ("fork --line-coverage", covered)):
            if fig is not None:
                rows.append([name, fig.cases, f"{fig.cases_per_s:.1f}", f"{fig.ms_per_case:.1f}"])
        click.echo(tabulate(rows, headers=["spawn", "cases", "cases/s", "ms/case"]))
        click.echo(f"\nfork/fresh throughput ratio: {data['ratio']}x (jobs={jobs})")
        click.echo(f"floor: {floor_fork:.3f} ms per bare fork+exit+wait x "
                   f"{per_case_incarnations:.2f} incarnations/case = {floor_ms:.2f} ms; "
                   f"fork-mode cost = {data['floor_multiple']}x floor (wall time per case at "
                   f"{jobs} jobs)")
        per = incarnation_cost(fork)
        click.echo(f"per incarnation (the fork-mode matrix): settle (nothing left to do) median "
                   f"{per['settle_median_ms']} ms, every other median {per['other_median_ms']} ms")
        if covered is not None:
            cost = coverage_cost(covered, fork)
            click.echo(f"--line-coverage: {cost['overhead']}x fork's time per case; with combining "
                       f"the data and writing the HTML ({cost['combine_s']} s): "
                       f"{cost['overhead_with_report']}x")
        if traced is not None and fresh is not None:
            click.echo(f"strace: {trace_cost(traced, fresh)['overhead']}x fresh's time per case (every "
                       "incarnation traced; the power fault traces only the one it crashes)")
        if states is not None:
            cost = states_cost(states, fork)
            click.echo(f"--states: {cost['vs_fork']}x fork's throughput; {cost['points']} crash points "
                       f"started from {cost['distinct_states']} distinct states, "
                       f"{cost['second_process_points']} second-process points from {cost['hosts']} "
                       f"hosts; {cost['primed']} states recovered while their recording ran; verdicts "
                       f"{'identical to' if cost['same_verdicts'] else 'DIFFERENT from'} fork's")
        for name, fig in (("fork", fork), ("fork --states", states)):
            if fig is not None and fig.cases:
                cpu = fig.cpu()
                click.echo(f"CPU per case, {name}: harness {cpu['harness_ms_per_case']} ms, agents "
                           f"{cpu['agents_ms_per_case']} ms ({cpu['cores_busy']} cores busy); the "
                           f"agents alone allow at most {cpu['agents_bound_cases_per_s']} cases/s on "
                           f"{fig.cores} core{'s' if fig.cores > 1 else ''}")
        click.echo(f"harness peak RSS: {data['peak_rss_mb']} MB "
                   f"(after each repeat: {fork.rss_after_mb})")
        if memory is not None:
            m = memory.to_json()
            click.echo(f"--states --depth {m['depth']} over {m['cases']} cases ({m['runs']} runs): harness "
                       f"RSS every {m['sample_every']} cases {m['rss_samples_mb']} MB (grew "
                       f"{m['rss_growth_mb']} MB), peak {m['peak_rss_mb']} MB; snapshots left on disk: "
                       f"{m['states_left_bytes']} bytes")
        if bytecode_cached:
            click.echo("PYTHONDONTWRITEBYTECODE is set: for the bench, agents cache bytecode in "
                       "__pycache__ as a default Python does, so fresh mode is not charged for "
                       "compiling")
    sys.exit(0 if data["failed"] == 0 else 1)
