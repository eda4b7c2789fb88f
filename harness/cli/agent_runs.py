"""Each agent's matrix run in turn, as `crashmatrix run` would run it, into `OUT/agents/<agent>/`.

What `compare` and `durability` share: every agent gets the same scenarios (those it can take;
the others are "not run", with the reason), its own results, run.json and reports in a folder
of its own, and an interrupted agent stops the whole command with what finished kept: the caller
still writes what it makes of the agents that finished, and `--resume` keeps each agent whose
run.json says it finished with the same options, running only the others.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click

from crashmatrix.harness.adapters.identity import identity
from crashmatrix.harness.adapters.interface import Adapter, PreflightError
from crashmatrix.harness.adapters.requirements import unmet
from crashmatrix.harness.cli.exitcodes import fail
from crashmatrix.harness.cli.matrix_setup import fsync_default, runner_config
from crashmatrix.harness.cli.report import load_results
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.netns import exposure
from crashmatrix.harness.records.results import (
    DEFAULT_MAX_EVENTS,
    RESULTS_FILE,
    CaseResult,
    ResultsError,
    ResultsWriter,
)
from crashmatrix.harness.records.run_record import (
    RUN_FILE,
    RunEnd,
    RunFileError,
    RunOptions,
    RunRecord,
    read_run,
    run_notes,
    write_run,
)
from crashmatrix.harness.verify import CHECKS
from crashmatrix.reports.header import header
from crashmatrix.reports.write import write_reports
from crashmatrix.scenarios.model import Scenario


def folder_of(agent: str) -> str:
    """A folder name for an agent as the user named it (`pkg.mod:AGENT` -> `pkg.mod_AGENT`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", agent) or "_"


def _writing_to(writer: ResultsWriter) -> Callable[[CaseResult, int], None]:
    """A matrix's `on_result` that writes each result as it finishes (none kept in memory)."""
    def on_result(result: CaseResult, known: int) -> None:
        writer.write(result)
    return on_result


@dataclass
class AgentRuns:
    results: dict[str, list[CaseResult]] = field(default_factory=dict)
    # (scenario, agent) -> why that agent did not run that scenario (or did not finish it)
    not_run: dict[tuple[str, str], str] = field(default_factory=dict)
    interrupted: str | None = None  # the agent whose run was interrupted; later ones never ran
    kept: list[str] = field(default_factory=list)  # agents whose finished run --resume kept


INTERRUPTED = "interrupted before this agent's matrix finished (`--resume` runs it)"


def _kept(folder: Path, options: RunOptions) -> list[CaseResult] | None:
    """The results of a finished run of the same options in `folder`; None when there is none
    (nothing there, or a run that did not finish: it runs again). Other options: refused."""
    try:
        record = read_run(folder / RUN_FILE)
    except RunFileError as exc:
        fail(f"--resume: {exc}")
    if record is None or record.ended is not RunEnd.FINISHED or not record.complete:
        return None
    if record.options != options:
        fail(f"--resume: {folder / RUN_FILE} was run with other options ({record.options}); run "
             "again with the same options, or without --resume to start over")
    try:
        return load_results(folder / RESULTS_FILE) if (folder / RESULTS_FILE).stat().st_size else []
    except (OSError, ResultsError) as exc:
        fail(f"--resume: {folder / RESULTS_FILE}: {exc}")


def run_agents(order: Sequence[str], adapters: Mapping[str, Adapter], scenarios: Sequence[Scenario],
               selected: Mapping[str, tuple[str, ...] | None], out_dir: Path, *, black_box: bool,
               jobs: int, timeout: float, spawn: str, printed: list[str], command: str = "compare",
               max_events: int = DEFAULT_MAX_EVENTS, resume: bool = False) -> AgentRuns:
    """Each agent's results, and the (scenario, agent) pairs not run with why. Interrupted, it
    returns at once with what finished (`interrupted` names the agent; it and every later one
    are "not run" for the reason INTERRUPTED); the caller exits 3 after writing what it can."""
    runs = AgentRuns()
    for a in order:
        try:
            interrupted = _run_agent(a, adapters[a], runs, scenarios, selected[a], out_dir,
                                     black_box=black_box, jobs=jobs, timeout=timeout, spawn=spawn,
                                     printed=printed, command=command, max_events=max_events,
                                     resume=resume)
        except KeyboardInterrupt:  # before or after its matrix: nothing more of it is written
            interrupted = True
        if interrupted:
            click.echo(f"crashmatrix {command}: interrupted during {a}; what finished is in "
                       f"{out_dir / 'agents'}", err=True)
            runs.interrupted = a
            for b in order[order.index(a):]:
                for sc in scenarios:
                    runs.not_run.setdefault((sc.name, b), INTERRUPTED)
            return runs
    return runs


def _run_agent(a: str, adapter: Adapter, runs: AgentRuns, scenarios: Sequence[Scenario],
               faults: tuple[str, ...] | None, out_dir: Path, *, black_box: bool, jobs: int,
               timeout: float, spawn: str, printed: list[str], command: str, max_events: int,
               resume: bool) -> bool:
    """One agent's run into its folder, its results into `runs`; True when interrupted inside
    its matrix (what finished is written, and its run.json says interrupted)."""
    runnable = []
    for s in scenarios:
        try:
            problems = unmet(adapter, [s])
        except PreflightError as exc:  # the agent does not load: nothing of it can run
            problems = [str(exc)]
        if problems:
            runs.not_run[(s.name, a)] = "; ".join(problems)
        else:
            runnable.append(s)
    folder = out_dir / "agents" / folder_of(a)
    folder.mkdir(parents=True, exist_ok=True)
    fsync = fsync_default(None, faults, black_box)
    click.echo(f"crashmatrix {command}: {a}: {len(runnable)} scenario(s)", err=True)
    options = RunOptions(agent=a, depth=1, fsync=fsync, timeout=timeout, spawn=spawn,
                         max_events=max_events, scenarios=tuple(s.name for s in runnable),
                         faults=faults, blackbox=black_box)
    kept = _kept(folder, options) if resume else None
    if kept is not None:
        click.echo(f"crashmatrix {command}: {a}: kept its finished run ({len(kept)} cases, --resume)",
                   err=True)
        runs.results[a] = kept
        runs.kept.append(a)
        return False
    who = identity(a, adapter)
    writer = ResultsWriter(folder / RESULTS_FILE)
    interrupted = False
    try:
        if runnable:
            with runner_config(a, timeout, fsync, False, spawn, resolved=adapter,
                               max_events=max_events, blackbox=black_box) as cfg:
                matrix = Matrix(MatrixConfig(scenarios=runnable, runner=cfg, depth=1, jobs=jobs,
                                             scenario_dirs=printed, faults=faults))
                matrix.run(_writing_to(writer))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        writer.close()
    found = load_results(folder / RESULTS_FILE) if (folder / RESULTS_FILE).stat().st_size else []
    runs.results[a] = found
    agent_run = RunRecord(
        declared_branches=tuple(adapter.declared_branches()), options=options, network_exposed=exposure(),
        agent_origin=who.origin, agent_framework=who.framework,
        done=len(found), complete=not interrupted,
        ended=RunEnd.INTERRUPTED if interrupted else RunEnd.FINISHED,
        expected=None if interrupted else {s.name: sum(1 for r in found if r.scenario == s.name)
                                           for s in runnable})
    write_run(folder / RUN_FILE, agent_run)
    if found:
        write_reports(found, folder, list(adapter.declared_branches()), notes=run_notes(agent_run),
                      header=header(found, list(CHECKS), agent_run))
    return interrupted
