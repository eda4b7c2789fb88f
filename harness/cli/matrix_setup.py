"""What every matrix command sets up: the scenarios chosen, the agent resolved and fitted, the runner.

`run`, `list`, `repro`, `bench`, `compare`, `durability`, `explore` and the Python API take these,
so each refuses the same bad input with the same words (exit 2 naming it) and starts its agents
the same way: a zygote forked before any thread, the fakes, a scratch directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from crashmatrix.fakes import FakeDownstream, FakeProvider
from crashmatrix.harness.adapters.interface import Adapter, PreflightError
from crashmatrix.harness.adapters.registry import AgentChoiceError, resolve_agent
from crashmatrix.harness.adapters.requirements import agent_label, misfit, unmet
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.portable import is_portable, portable_paths
from crashmatrix.harness.execution.fs_trace import TracerMissing, strace_path
from crashmatrix.harness.execution.runner import RunnerConfig
from crashmatrix.harness.execution.scratch import scratch_dir
from crashmatrix.harness.execution.spawn import SpawnMode
from crashmatrix.harness.execution.spawners import make_spawner
from crashmatrix.harness.faults.registry import FAULTS, observing
from crashmatrix.harness.records.results import DEFAULT_MAX_EVENTS
from crashmatrix.scenarios import ScenarioError, is_builtin, load_all, resolve
from crashmatrix.scenarios.model import Scenario


def scenarios_named(names: tuple[str, ...], dirs: tuple[str, ...]) -> list[Scenario]:
    try:
        if names:
            return resolve(names, dirs)
        return list(load_all(dirs).values())
    except ScenarioError as exc:
        fail(str(exc))


def require_fit(adapter: Adapter, scenarios: list[Scenario]) -> None:
    """Every one of `scenarios` must fit the agent (exit 2 naming why not); loads a framework
    app once to learn its tools (exit 2 with the traceback when it does not load)."""
    try:
        problems = unmet(adapter, scenarios)
    except PreflightError as exc:
        fail(str(exc))
    if problems:
        fail("; ".join(problems))


def fitting(adapter: Adapter, scenarios: list[Scenario], named: bool) -> list[Scenario]:
    """The scenarios to run. Named ones, and those of the user's own `--scenarios` folders, must
    all fit (as `require_fit`: exit 2 naming why not); of the built-ins run by default, those the
    agent can run, the others listed on stderr with why, exit 2 only when none fits."""
    own = [s for s in scenarios if named or not is_builtin(s)]
    require_fit(adapter, own)
    builtin = [s for s in scenarios if s not in own]
    try:
        reasons = {s.name: misfit(adapter, s) for s in builtin}
    except PreflightError as exc:
        fail(str(exc))
    left = [s for s in builtin if reasons[s.name]]
    if left and len(left) == len(scenarios):
        fail(f"agent {agent_label(adapter)!r} can run none of the scenarios: "
             + "; ".join(r for s in left for r in reasons[s.name])
             + " (write scenarios for its tools and load them with --scenarios DIR)")
    if left:
        click.echo(f"crashmatrix: left out {len(left)} built-in scenario(s) agent "
                   f"{agent_label(adapter)!r} cannot run:", err=True)
    for s in left:
        click.echo(f"  {s.name}: {'; '.join(reasons[s.name])}", err=True)
    return [s for s in scenarios if s not in left]


def adapter_named(name: str) -> Adapter:
    try:
        return resolve_agent(name)
    except AgentChoiceError as exc:
        fail(str(exc))


@contextmanager
def runner_config(agent: str | Adapter, timeout: float, fsync: bool, keep: bool, spawn: str = "fork",
                   work: Path | None = None, coverage_dir: Path | None = None,
                   resolved: Adapter | None = None,
                   max_events: int = DEFAULT_MAX_EVENTS, blackbox: bool = False,
                   coverage_source: str | None = None, syscalls: bool = False) -> Iterator[RunnerConfig]:
    """`agent` as the user named it (recorded in results), or an adapter; `resolved`: the
    adapter a caller already resolved from that name (so it is looked up once);
    `coverage_source`: what --line-coverage measures (`coverage_source_of`), None: the adapter's."""
    adapter = resolved or (adapter_named(agent) if isinstance(agent, str) else agent)
    python = adapter.python
    preload = list(python.preload) if python else None
    source = coverage_source or (python.measured if python else "")
    # Under --line-coverage (refused by `run` for an agent without a Python entry) the zygote
    # measures the agent's import-time lines as it preloads it, so they count as run (every
    # incarnation runs them); each recovery child then measures only what it runs itself.
    measure: tuple[Path, str] | None = None
    if coverage_dir and python:
        # deferred: line_coverage is ~1 ms of every start; only --line-coverage needs it
        from crashmatrix.harness.execution.line_coverage import IMPORTS_DATA  # noqa: PLC0415

        measure = (coverage_dir / IMPORTS_DATA, source)
    # The zygote starts first, before this process has any thread, so it forks clean children.
    spawner = make_spawner(SpawnMode(spawn), preload, measure)
    try:
        with FakeProvider() as provider, FakeDownstream() as downstream, \
                scratch_dir(prefix="crashmatrix-") as tmp:
            yield RunnerConfig(adapter=adapter, provider=provider, downstream=downstream,
                               work_root=work or Path(tmp),
                               case_timeout_s=timeout, max_events=max_events, fsync=fsync,
                               keep=keep, spawner=spawner,
                               coverage_dir=coverage_dir,
                               coverage_source=source,
                               agent_ref=agent if isinstance(agent, str) else None,
                               blackbox=blackbox, syscalls=syscalls)
    finally:
        spawner.close()


def need_tracer(selected: tuple[str, ...]) -> None:
    if observing(f for f in FAULTS.all() if f.name in selected):
        try:
            strace_path()
        except TracerMissing as exc:
            fail(str(exc), Exit.HARNESS)


def fsync_default(given: str | None, selected: tuple[str, ...] | None, black_box: bool = False) -> bool:
    """--fsync as given; else on when a selected fault observes file-system calls (a power loss
    keeps only what was synced, a failed sync needs a sync: the agent must be asked to sync to
    be judged on it) and in black-box mode (its syncs are crash points), off otherwise."""
    if given is not None:
        return given == "on"
    return black_box or (selected is not None and observing(f for f in FAULTS.all() if f.name in selected))


def printed_dirs(dirs: tuple[str, ...], where: str | None = None) -> list[str]:
    """The --scenarios folders as repro lines will print them (relative to `where`, the run's
    directory, when the lines `cd` there first); said once if one cannot be named without this
    machine's absolute path (outside the repository and the current directory)."""
    printed = portable_paths(dirs, from_here=where is not None)
    for shown in printed:
        if not is_portable(shown):
            click.echo(f"crashmatrix: note: --scenarios {shown} lies outside the repository and the "
                       "current directory, so repro lines name it by this machine's absolute path",
                       err=True)
    return printed
