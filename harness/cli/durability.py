"""`crashmatrix durability`: every agent's crash matrix, and the table of which promises each one keeps.

Each agent (default: every registered one) runs the named scenarios (default `changelog-fast`)
under the fault kinds asked for (default kill, power and second), each agent with those it can
take, as `compare` runs them, into `OUT/agents/<agent>/`. Then `OUT/durability.md` and
`OUT/durability.json` hold the table (reports/durability.py) and the terminal shows it; `--write
FILE` also writes the page there (docs/durability.md in this repository), refusing a file that
crashmatrix did not write. Exit 0 once the table is written, whatever it shows; 2 for bad input;
3 when a case could not be run or the command was interrupted.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click

from crashmatrix.harness.adapters.interface import profile_of
from crashmatrix.harness.adapters.registry import list_agents
from crashmatrix.harness.cli.agent_runs import run_agents
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.matrix_setup import adapter_named, need_tracer, printed_dirs, scenarios_named
from crashmatrix.harness.faults.registry import FAULTS
from crashmatrix.harness.records.results import DEFAULT_TIMEOUT_S, Verdict
from crashmatrix.reports.durability import MARK, render_markdown, render_terminal, row

DEFAULT_OUT = "crashmatrix-durability"
DEFAULT_SCENARIOS = ("changelog-fast",)
DEFAULT_FAULTS = ("kill", "power", "second")
OUR_FILES = ("durability.md", "durability.json", "agents")


def _claim(out_dir: Path, overwrite: bool) -> None:
    """Refuse an --out that holds our file names but no durability.json of ours (someone else's)."""
    present = [n for n in OUR_FILES if (out_dir / n).exists()] if out_dir.is_dir() else []
    if overwrite or not present or (out_dir / "durability.json").is_file():
        return
    fail(f"--out {out_dir}: it already holds {', '.join(present)}, and no durability.json says "
         "crashmatrix wrote them; choose another --out, or pass --overwrite to replace them")


def _page_writable(page: Path, overwrite: bool) -> None:
    """Refuse (exit 2, before anything runs) a page that exists and was not written by us."""
    if overwrite or not page.exists():
        return
    if page.is_dir():
        fail(f"--write {page}: it is a directory; name the page's file")
    try:
        ours = MARK in page.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        ours = False
    if not ours:
        fail(f"--write {page}: the file exists and no line in it says crashmatrix durability wrote "
             "it; choose another file, or pass --overwrite to replace it")


def _command(agents: tuple[str, ...], names: tuple[str, ...], faults: tuple[str, ...],
             write: str | None) -> str:
    """The command line that writes this table, in a canonical order (for the page's header)."""
    words = ["crashmatrix", "durability"]
    for flag, values in (("--agent", agents), ("--scenario", names), ("--fault", faults)):
        for v in values:
            words += [flag, v]
    if write:
        words += ["--write", write]
    return shlex.join(words)


@click.command("durability")
@click.option("--agent", "agents", multiple=True, metavar="NAME",
              help="An agent to judge (repeatable, in the table's row order; default: every "
                   "registered agent).")
@click.option("--scenario", "names", multiple=True, metavar="NAME",
              help=f"Scenario to run (repeatable; default: {', '.join(DEFAULT_SCENARIOS)}).")
@click.option("--scenarios", "dirs", multiple=True, metavar="DIR", type=click.Path(file_okay=False),
              help="Also load scenarios from DIR (repeatable).")
@click.option("--fault", "fault_names", multiple=True, metavar="NAME",
              help=f"Fault kind (repeatable; default: {', '.join(DEFAULT_FAULTS)}); each agent runs "
                   "those its adapter can take, and a promise no selected fault can reach is not "
                   "applicable, with why.")
@click.option("--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option("--timeout", default=DEFAULT_TIMEOUT_S, show_default=True, metavar="S",
              help="Per-case deadline; an agent that exceeds it is a liveness violation.")
@click.option("--spawn", type=click.Choice(["fork", "fresh"]), default="fork", show_default=True)
@click.option("--out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False))
@click.option("--write", "write", metavar="FILE", default=None,
              help="Also write the page to FILE (e.g. docs/durability.md); a file crashmatrix did "
                   "not write is refused unless --overwrite.")
@click.option("--overwrite", is_flag=True, help="Replace files in OUT and --write FILE even when "
              "crashmatrix did not write them.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as one JSON object on stdout.")
def durability(agents: tuple[str, ...], names: tuple[str, ...], dirs: tuple[str, ...],
               fault_names: tuple[str, ...], jobs: int, timeout: float, spawn: str, out: str,
               write: str | None, overwrite: bool, as_json: bool) -> None:
    """Run each agent's crash matrix and write the table of the promises it keeps."""
    order = list(dict.fromkeys(agents)) or [a.name for a in list_agents()]
    scenarios = scenarios_named(names or DEFAULT_SCENARIOS, dirs)
    faults = tuple(dict.fromkeys(fault_names)) or DEFAULT_FAULTS
    known = {f.name: f for f in FAULTS.all()}
    unknown = [f for f in faults if f not in known]
    if unknown:
        fail(f"--fault {unknown[0]}: unknown fault (known: {', '.join(sorted(known))})")
    adapters = {a: adapter_named(a) for a in order}  # every name checked before anything runs
    # Each agent takes the selected kinds its adapter supports (kill: every adapter).
    selected: dict[str, tuple[str, ...] | None] = {
        a: tuple(f for f in faults if known[f].requires <= adapters[a].capabilities) for a in order}
    need_tracer(tuple({f for chosen in selected.values() for f in chosen or ()}))
    out_dir = Path(out)
    _claim(out_dir, overwrite)
    page = Path(write) if write else None
    if page is not None:
        _page_writable(page, overwrite)
    runs = run_agents(order, adapters, scenarios, selected, out_dir, black_box=False, jobs=jobs,
                      timeout=timeout, spawn=spawn, printed=printed_dirs(dirs), command="durability")
    if runs.interrupted is not None:
        sys.exit(int(Exit.HARNESS))  # no partial table: a page of rows of unfinished runs would mislead
    results, not_run = runs.results, runs.not_run
    rows = []
    for a in order:
        skipped = [f"{s.name}: {why}" for (s_name, agent), why in sorted(not_run.items())
                   for s in scenarios if agent == a and s.name == s_name]
        ran = results.get(a) or []
        rows.append(row(a, profile_of(adapters[a]), ran, frozenset(c.value for c in adapters[a].capabilities),
                        not_run="; ".join(skipped) if skipped and not ran else None))
    scenario_names = [s.name for s in scenarios]
    text = render_markdown(rows, _command(agents, names, fault_names, write), scenario_names)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "durability.md").write_text(text, encoding="utf-8")
    data = {"scenarios": scenario_names, "faults": list(faults), "rows": [r.to_json() for r in rows]}
    (out_dir / "durability.json").write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n",
                                             encoding="utf-8")
    if page is not None:
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(text, encoding="utf-8")
    click.echo(json.dumps(data, ensure_ascii=False) if as_json else render_terminal(rows))
    click.echo(f"wrote {out_dir / 'durability.md'}, durability.json"
               + (f", {page}" if page is not None else "")
               + f", and each agent's run under {out_dir / 'agents'}", err=True)
    if any(r.verdict is Verdict.ERROR for found in results.values() for r in found):
        sys.exit(int(Exit.HARNESS))
