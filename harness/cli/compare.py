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
import sys
from pathlib import Path

import click

from crashmatrix.harness.cli.agent_runs import folder_of, run_agents
from crashmatrix.harness.cli.common_options import selected_faults
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.matrix_setup import adapter_named, printed_dirs, scenarios_named
from crashmatrix.harness.cli.run import _black_box_scenarios
from crashmatrix.harness.cli.traced_modes import black_box_usable
from crashmatrix.harness.records.results import (
    DEFAULT_MAX_EVENTS,
    DEFAULT_TIMEOUT_S,
    Verdict,
)
from crashmatrix.harness.verify import CHECKS
from crashmatrix.reports.compare import compare, judged, render_html, render_markdown, render_terminal

DEFAULT_OUT = "crashmatrix-compare"
OUR_FILES = ("compare.md", "compare.html", "compare.json", "agents")


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
@click.option("--max-events", default=DEFAULT_MAX_EVENTS, show_default=True, metavar="N",
              type=click.IntRange(1), help="Step bound, as on `run`: an incarnation that emits more "
              "probe events is killed at once (a looping agent is stopped early: that is its verdict).")
@click.option("--spawn", type=click.Choice(["fork", "fresh"]), default="fork", show_default=True)
@click.option("--out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False))
@click.option("--overwrite", is_flag=True, help="Replace files in OUT even when no compare.json is there.")
@click.option("--resume", is_flag=True,
              help="Keep each agent whose run under OUT/agents finished with the same options; run the rest.")
@click.option("--json", "as_json", is_flag=True, help="Print the cells as one JSON object on stdout.")
def compare_cmd(agents: tuple[str, ...], names: tuple[str, ...], dirs: tuple[str, ...],
                fault_names: tuple[str, ...], black_box: bool, jobs: int, timeout: float,
                max_events: int, spawn: str, out: str, overwrite: bool, resume: bool,
                as_json: bool) -> None:
    """Run the same single-crash matrix against each agent and print who held what.

    Interrupted, it still writes the table of the agents that finished (the others marked not
    run); `--resume` then runs only those."""
    order = list(dict.fromkeys(agents))
    scenarios = scenarios_named(names, dirs)
    out_dir = Path(out)
    adapters = {a: adapter_named(a) for a in order}  # every name checked before anything runs
    selected = {a: selected_faults(adapters[a], fault_names) for a in order}
    if black_box:
        for a in order:
            black_box_usable(adapters[a], selected[a], 1)
        scenarios = _black_box_scenarios(scenarios, named=bool(names))
    _claim(out_dir, overwrite or resume)
    runs = run_agents(order, adapters, scenarios, selected, out_dir, black_box=black_box, jobs=jobs,
                      timeout=timeout, spawn=spawn, printed=printed_dirs(dirs), max_events=max_events,
                      resume=resume)
    results, not_run = runs.results, runs.not_run
    # "held" next to "held" means as much as what each was judged on: every renderer says it.
    judgements = {a: judged(a, results[a], list(CHECKS)) for a in order if results.get(a)}
    cells = compare([s.name for s in scenarios], order, results, not_run, judgements)
    shown = list(judgements.values())
    links = {a: f"agents/{folder_of(a)}/report.html" for a in order if results.get(a)}
    (out_dir / "compare.md").write_text(render_markdown(cells, judgements=shown), encoding="utf-8")
    (out_dir / "compare.html").write_text(render_html(cells, links=links, judgements=shown),
                                          encoding="utf-8")
    data = {"agents": order, "scenarios": [s.name for s in scenarios],
            "cells": [c.to_json() for c in cells], "judged": [j.to_json() for j in shown]}
    (out_dir / "compare.json").write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n",
                                          encoding="utf-8")
    click.echo(json.dumps(data, ensure_ascii=False) if as_json else render_terminal(cells, shown))
    click.echo(f"wrote {out_dir / 'compare.md'}, compare.html, compare.json, and each agent's run "
               f"under {out_dir / 'agents'}", err=True)
    if runs.interrupted is not None:
        click.echo(f"crashmatrix compare: interrupted during {runs.interrupted}: the table holds the "
                   "agents that finished; `crashmatrix compare ... --resume` (the same options) runs the "
                   "rest", err=True)
        sys.exit(int(Exit.HARNESS))
    if any(r.verdict is Verdict.ERROR for found in results.values() for r in found):
        sys.exit(int(Exit.HARNESS))
