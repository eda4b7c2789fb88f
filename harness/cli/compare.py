"""`crashmatrix compare`: the same crash matrix against several agents, and a table of who held what.

Each agent's matrix is run as `crashmatrix run` would run it, into `OUT/agents/<agent>/` (results,
run.json, the three reports); then `OUT/compare.md`, `OUT/compare.html` and `OUT/compare.json`
hold the scenario x agent table (reports/compare.py), and the terminal shows it. A scenario an
agent cannot take (a capability it lacks) is a "not run" cell with the reason, not an error.
Exit 0 once the table is written, whatever it shows (comparing is the point: the baseline is
expected to fail); 2 for bad input; 3 when a case could not be run (a harness error) or the
comparison was interrupted.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import click

from crashmatrix.harness.adapters.interface import PreflightError
from crashmatrix.harness.adapters.requirements import unmet
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.report import load_results
from crashmatrix.harness.cli.run import (
    _adapter,
    _black_box_scenarios,
    _black_box_usable,
    _faults,
    _fsync,
    _printed_dirs,
    _runner_config,
    _scenarios,
)
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.records.results import (
    DEFAULT_TIMEOUT_S,
    RESULTS_FILE,
    CaseResult,
    ResultsWriter,
    Verdict,
)
from crashmatrix.harness.records.run_record import RUN_FILE, RunEnd, RunOptions, RunRecord, write_run
from crashmatrix.reports.compare import compare, render_html, render_markdown, render_terminal
from crashmatrix.reports.write import write_reports

DEFAULT_OUT = "crashmatrix-compare"
OUR_FILES = ("compare.md", "compare.html", "compare.json", "agents")


def folder_of(agent: str) -> str:
    """A folder name for an agent as the user named it (`pkg.mod:AGENT` -> `pkg.mod_AGENT`)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", agent) or "_"


def _writing_to(writer: ResultsWriter) -> Callable[[CaseResult, int], None]:
    """A matrix's `on_result` that writes each result as it finishes (none kept in memory)."""
    def on_result(result: CaseResult, known: int) -> None:
        writer.write(result)
    return on_result


def _claim(out_dir: Path, overwrite: bool) -> None:
    """Refuse an --out that holds our file names but no compare.json of ours (someone else's)."""
    present = [n for n in OUR_FILES if (out_dir / n).exists()] if out_dir.is_dir() else []
    if overwrite or not present or (out_dir / "compare.json").is_file():
        return
    fail(f"--out {out_dir}: it already holds {', '.join(present)}, and no compare.json says crashmatrix "
         "wrote them; choose another --out, or pass --overwrite to replace them")


@click.command("compare")
@click.option("--agent", "agents", multiple=True, required=True, metavar="NAME",
              help="An agent to run the matrix against (repeatable, in the table's column order): "
                   "a registered name, mutant:NAME or module:attr.")
@click.option("--scenario", "names", multiple=True, metavar="NAME",
              help="Scenario to run (repeatable; default: every built-in and --scenarios one).")
@click.option("--scenarios", "dirs", multiple=True, metavar="DIR", type=click.Path(file_okay=False),
              help="Also load scenarios from DIR (repeatable).")
@click.option("--fault", "fault_names", multiple=True, metavar="NAME",
              help="Fault kind to enumerate (repeatable; default: each agent's default set).")
@click.option("--black-box", "black_box", is_flag=True,
              help="Crash every agent at its store calls, with no probes (see `run --black-box`).")
@click.option("--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option("--timeout", default=DEFAULT_TIMEOUT_S, show_default=True, metavar="S",
              help="Per-case deadline; an agent that exceeds it is a liveness violation.")
@click.option("--spawn", type=click.Choice(["fork", "fresh"]), default="fork", show_default=True)
@click.option("--out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False))
@click.option("--overwrite", is_flag=True, help="Replace files in OUT even when no compare.json is there.")
@click.option("--json", "as_json", is_flag=True, help="Print the cells as one JSON object on stdout.")
def compare_cmd(agents: tuple[str, ...], names: tuple[str, ...], dirs: tuple[str, ...],
                fault_names: tuple[str, ...], black_box: bool, jobs: int, timeout: float, spawn: str,
                out: str, overwrite: bool, as_json: bool) -> None:
    """Run the same single-crash matrix against each agent and print who held what."""
    order = list(dict.fromkeys(agents))
    scenarios = _scenarios(names, dirs)
    out_dir = Path(out)
    adapters = {a: _adapter(a) for a in order}  # every name checked before anything runs
    selected = {a: _faults(adapters[a], fault_names) for a in order}
    if black_box:
        for a in order:
            _black_box_usable(adapters[a], selected[a], 1)
        scenarios = _black_box_scenarios(scenarios, named=bool(names))
    _claim(out_dir, overwrite)
    not_run: dict[tuple[str, str], str] = {}
    results: dict[str, list[CaseResult]] = {}
    printed = _printed_dirs(dirs)
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
        click.echo(f"crashmatrix compare: {a}: {len(runnable)} scenario(s)", err=True)
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
        write_run(folder / RUN_FILE, RunRecord(
            declared_branches=tuple(adapter.declared_branches()), options=options,
            done=len(found), complete=not interrupted,
            ended=RunEnd.INTERRUPTED if interrupted else RunEnd.FINISHED,
            expected=None if interrupted else {s.name: sum(1 for r in found if r.scenario == s.name)
                                               for s in runnable}))
        if found:
            write_reports(found, folder, list(adapter.declared_branches()))
        if interrupted:
            click.echo(f"crashmatrix compare: interrupted during {a}; what finished is in {folder}",
                       err=True)
            sys.exit(int(Exit.HARNESS))
    cells = compare([s.name for s in scenarios], order, results, not_run)
    links = {a: f"agents/{folder_of(a)}/report.html" for a in order if results.get(a)}
    (out_dir / "compare.md").write_text(render_markdown(cells), encoding="utf-8")
    (out_dir / "compare.html").write_text(render_html(cells, links=links), encoding="utf-8")
    data = {"agents": order, "scenarios": [s.name for s in scenarios],
            "cells": [c.to_json() for c in cells]}
    (out_dir / "compare.json").write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n",
                                          encoding="utf-8")
    click.echo(json.dumps(data, ensure_ascii=False) if as_json else render_terminal(cells))
    click.echo(f"wrote {out_dir / 'compare.md'}, compare.html, compare.json, and each agent's run "
               f"under {out_dir / 'agents'}", err=True)
    if any(r.verdict is Verdict.ERROR for found in results.values() for r in found):
        sys.exit(int(Exit.HARNESS))
