"""`crashmatrix baseline`: write the known failures of a results file as a baseline."""

from __future__ import annotations

from pathlib import Path

import click

from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.report import load_results
from crashmatrix.harness.records.baseline import of_results, write
from crashmatrix.harness.records.results import ResultsError, resolve_results_path


@click.command("baseline")
@click.argument("source", type=click.Path())
@click.option("--write", "target", required=True, metavar="FILE", type=click.Path(dir_okay=False),
              help="The baseline file to write (replaced whole; `run --baseline FILE` reads it).")
def baseline(source: str, target: str) -> None:
    """List the cases in SOURCE (a results file or the folder holding one) that did not hold, with
    their invariants, as the known failures `run --baseline` and `--crashmatrix-baseline` expect."""
    try:
        results = load_results(resolve_results_path(Path(source)))
    except ResultsError as exc:
        fail(str(exc), Exit.USAGE)
        return
    known = of_results(results)
    write(Path(target), known)
    click.echo(f"wrote {target}: {len(known.cases)} known failure(s) of {len(results)} case(s)")
