"""`crashmatrix repro`: one case run again, exactly, and its timeline printed."""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

import click

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.cli.common_options import selected_faults, with_common
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.list_cmd import enumerate_cases
from crashmatrix.harness.cli.matrix_setup import (
    adapter_named,
    fsync_default,
    require_fit,
    runner_config,
    scenarios_named,
)
from crashmatrix.harness.cli.portable import portable_paths
from crashmatrix.harness.cli.traced_modes import black_box_usable, syscalls_usable
from crashmatrix.harness.cli.verdict_exit import verdict_exit
from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.execution.runner import CaseRunner
from crashmatrix.harness.faults.registry import check_faults
from crashmatrix.harness.records.case import Case, CaseIdError
from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.redact import redact
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.harness.records.terminal_text import terminal_safe
from crashmatrix.reports.timeline import render as render_timeline
from crashmatrix.scenarios import ScenarioError
from crashmatrix.scenarios.arrivals import parse as arrival_of


@click.command("repro")
@click.argument("case_id", required=False)
@with_common
@click.option("--keep", is_flag=True, help="Keep the case's session and workspace and print where.")
@click.option("--file", "repro_file", type=click.Path(dir_okay=False),
              help="Replay a repro file written by `crashmatrix explore` (scenario, case and agent).")
def repro(case_id: str | None, names: tuple[str, ...], dirs: tuple[str, ...], agent: str, timeout: float,
          max_events: int, fsync_given: str | None, fault_names: tuple[str, ...], spawn: str, keep: bool,
          repro_file: str | None, black_box: bool) -> None:
    """Re-run exactly one case and print its timeline (its id names its faults: no --fault needed)."""
    if repro_file is not None:
        _repro_file(Path(repro_file), timeout, fsync_given == "on", spawn, keep)
        return
    if case_id is None:
        fail("give a CASE_ID, or --file PATH")
        return
    try:
        case = Case.parse(case_id)
    except CaseIdError as exc:
        fail(str(exc))
        return
    known = {s.name: s for s in scenarios_named(names, dirs)}
    if case.scenario not in known and arrival_of(case.scenario):  # a variant: rebuilt from its name
        known |= {s.name: s for s in scenarios_named((case.scenario,), dirs)}
    scenario = known.get(case.scenario)
    if scenario is None:
        import difflib  # noqa: PLC0415 - deferred: only an unknown name needs it

        close = difflib.get_close_matches(case.scenario, list(known), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(known))}"
        fail(f"unknown scenario {case.scenario!r} in case id {case_id!r}{hint}")
        return
    # The case's own faults are enumerated (and --fault ones too), whatever the default set.
    named = tuple(dict.fromkeys([*fault_names, *(step.fault for step in case.schedule)]))
    selected = named or None
    black_box = black_box or case.blackbox  # a black-box step's id says so
    if black_box:
        black_box_usable(adapter_named(agent), selected, case.depth or 1)
    syscalls = any(step.syscall for step in case.schedule)
    if syscalls:
        syscalls_usable(adapter_named(agent), selected)
    work = Path(tempfile.mkdtemp(prefix="crashmatrix-repro-")) if keep else None
    fsync = fsync_default(fsync_given, selected, black_box)
    adapter = adapter_named(agent)
    # Before the runner starts its zygote: a hosted app's describe starts the one it then takes.
    require_fit(adapter, [scenario])
    with runner_config(agent, timeout, fsync, keep, spawn, work=work, max_events=max_events,
                       blackbox=black_box, syscalls=syscalls, resolved=adapter) as cfg:
        try:
            check_faults(case, cfg.adapter)
        except CaseIdError as exc:
            fail(f"case id {case_id!r}: {exc}")
        if selected:
            selected_faults(cfg.adapter, selected)
        if case.schedule:
            # A first step at a system call needs the recording traced to be found.
            found = {c.case_id: c for c in enumerate_cases(cfg, scenario, selected, case.schedule[0].syscall)}
            # A variant (`power-subsets:011`) is of a point the recording gives; whether it fits
            # the state there is for the run to say (a mask of another length: nondeterministic).
            step = case.schedule[0]
            first = Case(case.scenario, (dataclasses.replace(step, variant=None),)).case_id
            if first not in found:
                import difflib  # noqa: PLC0415 - deferred: only an unknown id needs it

                close = difflib.get_close_matches(first, list(found), n=3, cutoff=0.5)
                fail(f"unknown case id {case_id!r}: scenario {case.scenario} has no crash point "
                     f"{step.token()}" + (f"; nearest: {', '.join(close)}" if close else ""))
            # The recording's own step: a system-call step's, with which call of its file it is.
            recorded = dataclasses.replace(found[first].schedule[0], variant=step.variant)
            case = Case(case.scenario, (recorded, *case.schedule[1:]))
        runner = CaseRunner(cfg)
        obs = runner.run(case, scenario)
        result = evaluate(obs, scenario, fsync=cfg.fsync, agent=cfg.agent,
                          scenario_dirs=portable_paths(dirs), duration_ms=0.0, timeout_s=timeout)
    _print_timeline(obs, result)
    if work is not None:
        click.echo(f"kept: {work}")
    sys.exit(int(verdict_exit([result])))


def _print_timeline(obs: Observation, result: CaseResult) -> None:
    """The case's timeline, as `repro` prints it: it quotes what the agent and its tools printed,
    so secrets are redacted and terminal escapes shown, never obeyed."""
    for line in render_timeline(obs, result):
        click.echo(terminal_safe(redact(line)))


def _repro_file(path: Path, timeout: float, fsync: bool, spawn: str, keep: bool) -> None:
    from crashmatrix.harness.adapters.mutant import MutantAdapter  # noqa: PLC0415 - rare path
    from crashmatrix.harness.explore import ReproFileError, read_repro, run_repro  # noqa: PLC0415
    from crashmatrix.harness.mutants.catalogue import MutantName  # noqa: PLC0415

    try:
        saved = read_repro(path)
        mutant = MutantName(saved.mutant) if saved.mutant else None
    except (ReproFileError, ScenarioError) as exc:
        fail(str(exc))
        return
    except ValueError:
        fail(f"{path}: field 'mutant': unknown mutant {saved.mutant!r}")
        return
    adapter: Adapter = MutantAdapter(mutant) if mutant else adapter_named(saved.agent)
    require_fit(adapter, [saved.scenario])
    try:
        check_faults(saved.case, adapter)
    except CaseIdError as exc:
        fail(f"{path}: {exc}")
    work = Path(tempfile.mkdtemp(prefix="crashmatrix-repro-")) if keep else None
    with runner_config(adapter, timeout, fsync, keep, spawn, work=work) as cfg:
        obs, result = run_repro(saved, cfg)
    _print_timeline(obs, result)
    if work is not None:
        click.echo(f"kept: {work}")
    sys.exit(int(Exit.HELD if result.ok else Exit.VIOLATIONS))
