"""`crashmatrix mutants`: hunt every mutant, print who killed it, exit 1 if any survived."""

from __future__ import annotations

import json
import sys

import click
from tabulate import tabulate

from crashmatrix.harness.cli.exitcodes import Exit
from crashmatrix.harness.execution.hunt import Hunt, hunt_all
from crashmatrix.harness.execution.spawn import SpawnMode
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName

KILLED, SURVIVED = "killed", "survived"


def _progress(h: Hunt) -> None:
    how = f"killed by {h.case} ({h.invariant})" if h.killed else "SURVIVED every built-in scenario"
    notes = []
    if not h.focused:
        notes.append("not by its catalogue scenarios")
    if h.unjudged:
        notes.append(f"{h.unjudged} case(s) nondeterministic or in error")
    extra = f" [{'; '.join(notes)}]" if notes else ""
    click.echo(f"mutant {h.mutant.value}: {how} after {h.cases} case(s){extra}", err=True)


def render(hunts: list[Hunt]) -> str:
    rows = [[h.mutant.value, KILLED if h.killed else SURVIVED, h.case or "-", h.invariant or "-"]
            for h in hunts]
    table = tabulate(rows, headers=["mutant", "verdict", "first killing case", "invariant"])
    # Below the table, not in it: a command is copied whole, and a column would wrap it.
    repros = [f"  {h.mutant.value}: {h.repro}" for h in hunts if h.repro]
    return table + ("\n\nreproduce a kill (the case, run against the mutant):\n" + "\n".join(repros)
                    if repros else "")


@click.command("mutants")
@click.option("--mutant", "names", multiple=True, metavar="NAME",
              type=click.Choice([m.value for m in MutantName]),
              help="Mutant to hunt (repeatable; default: the whole catalogue).")
@click.option("--json", "as_json", is_flag=True,
              help='Print a JSON list of {"mutant", "killed", "case", "invariant", "repro"} on stdout.')
@click.option("--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Cases of one mutant run in parallel.")
@click.option("--spawn", type=click.Choice([m.value for m in SpawnMode]), default="fork",
              show_default=True,
              help="fork: incarnations fork from a pre-imported zygote; fresh: a new interpreter each.")
@click.option("--timeout", default=30.0, show_default=True, metavar="S",
              help="Per-case deadline (a mutant that hangs is killed by liveness).")
@click.option("--states", is_flag=True,
              help="Start crash cases from recorded crash states, as `run --states` does (every "
                   "mutant must be killed by the same case as without).")
def mutants(names: tuple[str, ...], as_json: bool, jobs: int, spawn: str, timeout: float,
            states: bool) -> None:
    """Run each faulty agent of the catalogue through its crash matrix; every one must be killed.

    A mutant is killed by the first failing case in enumeration order (recordings, then single
    crashes, then crash loops). A survivor means the matrix or the verifier has a hole.
    """
    chosen = [MutantName(n) for n in dict.fromkeys(names)] or list(CATALOGUE)
    try:
        hunts = hunt_all(chosen, jobs=jobs, spawn=SpawnMode(spawn), timeout_s=timeout,
                         on_hunt=_progress, states=states)
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM (crashmatrix.harness.cli.main)
        click.echo(f"crashmatrix: {exc or 'interrupted by SIGINT'}", err=True)
        sys.exit(int(Exit.HARNESS))
    if as_json:
        click.echo(json.dumps([h.to_json() for h in hunts], ensure_ascii=False))
    else:
        click.echo(render(hunts))
    sys.exit(int(Exit.HELD if all(h.killed for h in hunts) else Exit.VIOLATIONS))
