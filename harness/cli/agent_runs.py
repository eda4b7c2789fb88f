"""Each agent's matrix run in turn, as `crashmatrix run` would run it, into `OUT/agents/<agent>/`.

What `compare` and `durability` share: every agent gets the same scenarios (those it can take;
the others are "not run", with the reason), its own results, run.json and reports in a folder
of its own, and an interrupted agent stops the whole command with what finished kept.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import click

from crashmatrix.harness.adapters.interface import Adapter, PreflightError
from crashmatrix.harness.adapters.requirements import unmet
from crashmatrix.harness.cli.exitcodes import Exit
from crashmatrix.harness.cli.report import load_results
from crashmatrix.harness.cli.run import _fsync, _runner_config
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.netns import exposure
from crashmatrix.harness.records.results import RESULTS_FILE, CaseResult, ResultsWriter
from crashmatrix.harness.records.run_record import (
    RUN_FILE,
    RunEnd,
    RunOptions,
    RunRecord,
    run_notes,
    write_run,
)
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


def run_agents(order: Sequence[str], adapters: Mapping[str, Adapter], scenarios: Sequence[Scenario],
               selected: Mapping[str, tuple[str, ...] | None], out_dir: Path, *, black_box: bool,
               jobs: int, timeout: float, spawn: str, printed: list[str], command: str = "compare"
               ) -> tuple[dict[str, list[CaseResult]], dict[tuple[str, str], str]]:
    """Each agent's results, and the (scenario, agent) pairs not run with why; exits 3 (what
    finished kept) when interrupted."""
    not_run: dict[tuple[str, str], str] = {}
    results: dict[str, list[CaseResult]] = {}
    for a in order:
        adapter = adapters[a]
        runnable = []
        for s in scenarios:
            try:
                problems = unmet(adapter, [s])
            except PreflightError as exc:  # the agent does not load: nothing of it can run
                problems = [str(exc)]
            if problems:
                not_run[(s.name, a)] = "; ".join(problems)
            else:
                runnable.append(s)
        folder = out_dir / "agents" / folder_of(a)
        folder.mkdir(parents=True, exist_ok=True)
        fsync = _fsync(None, selected[a], black_box)
        click.echo(f"crashmatrix {command}: {a}: {len(runnable)} scenario(s)", err=True)
        options = RunOptions(agent=a, depth=1, fsync=fsync, timeout=timeout, spawn=spawn,
                             scenarios=tuple(s.name for s in runnable), faults=selected[a],
                             blackbox=black_box)
        writer = ResultsWriter(folder / RESULTS_FILE)
        interrupted = False
        try:
            if runnable:
                with _runner_config(a, timeout, fsync, False, spawn, resolved=adapter,
                                    blackbox=black_box) as cfg:
                    matrix = Matrix(MatrixConfig(scenarios=runnable, runner=cfg, depth=1, jobs=jobs,
                                                 scenario_dirs=printed, faults=selected[a]))
                    matrix.run(_writing_to(writer))
        except KeyboardInterrupt:
            interrupted = True
        finally:
            writer.close()
        found = load_results(folder / RESULTS_FILE) if (folder / RESULTS_FILE).stat().st_size else []
        results[a] = found
        agent_run = RunRecord(
            declared_branches=tuple(adapter.declared_branches()), options=options, network_exposed=exposure(),
            done=len(found), complete=not interrupted,
            ended=RunEnd.INTERRUPTED if interrupted else RunEnd.FINISHED,
            expected=None if interrupted else {s.name: sum(1 for r in found if r.scenario == s.name)
                                               for s in runnable})
        write_run(folder / RUN_FILE, agent_run)
        if found:
            write_reports(found, folder, list(adapter.declared_branches()), notes=run_notes(agent_run))
        if interrupted:
            click.echo(f"crashmatrix {command}: interrupted during {a}; what finished is in {folder}",
                       err=True)
            sys.exit(int(Exit.HARNESS))
    return results, not_run
