"""The matrix commands of `crashmatrix`: run, list, repro, merge (click wiring at the edge)."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
from tabulate import tabulate

from crashmatrix.fakes import FakeProvider
from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.adapters.mutant import MutantAdapter
from crashmatrix.harness.adapters.registry import DEFAULT_AGENT, AgentChoiceError, list_agents, resolve_agent
from crashmatrix.harness.adapters.requirements import unmet
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.progress import Progress
from crashmatrix.harness.cli.report import (
    RUN_FILE,
    coverage_failures,
    coverage_message,
    load_results,
    report,
)
from crashmatrix.harness.enumeration import parse_shard, single_crash_cases
from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.execution.line_coverage import combine_and_report
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.runner import CaseRunner, RunnerConfig
from crashmatrix.harness.execution.scratch import scratch_dir
from crashmatrix.harness.execution.spawn import SpawnMode
from crashmatrix.harness.execution.spawners import make_spawner
from crashmatrix.harness.faults.registry import check_faults, faults_for
from crashmatrix.harness.mutants.catalogue import MutantName
from crashmatrix.harness.records.case import Case, CaseIdError
from crashmatrix.harness.records.results import (
    RESULTS_FILE,
    CaseResult,
    ResultsError,
    ResultsWriter,
    Verdict,
    merge,
    summary,
)
from crashmatrix.reports.terminal import render as render_summary
from crashmatrix.reports.timeline import render as render_timeline
from crashmatrix.reports.write import ReportFile, write_reports
from crashmatrix.scenarios import ScenarioError, load_all, resolve
from crashmatrix.scenarios.model import Scenario

DEFAULT_OUT = "crashmatrix-out"


def _scenarios(names: tuple[str, ...], dirs: tuple[str, ...]) -> list[Scenario]:
    try:
        if names:
            return resolve(names, dirs)
        return list(load_all(dirs).values())
    except ScenarioError as exc:
        fail(str(exc))


# What crashmatrix writes into --out; other files there are never touched.
OUR_FILES = (RESULTS_FILE, RUN_FILE, *(f.value for f in ReportFile), "coverage", "coverage-data",
             "cases")


def _claim_out(out_dir: Path, overwrite: bool) -> None:
    """Refuse an --out whose result files some other program (or person) wrote: only a directory
    holding a run.json of ours, or none of our file names, is ours to write into."""
    present = [name for name in OUR_FILES if (out_dir / name).exists()] if out_dir.is_dir() else []
    if overwrite or not present or _is_our_run_file(out_dir / RUN_FILE):
        return
    fail(f"--out {out_dir}: it already holds {', '.join(present)}, and no run.json says crashmatrix "
         "wrote them; choose another --out, or pass --overwrite to replace them")


def _is_our_run_file(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"agent", "declared_branches"} <= set(data)


def _require(adapter: Adapter, scenarios: list[Scenario]) -> None:
    problems = unmet(adapter, scenarios)
    if problems:
        fail("; ".join(problems) + " (choose the scenarios it can run with --scenario)")


def _adapter(name: str) -> Adapter:
    try:
        return resolve_agent(name)
    except AgentChoiceError as exc:
        fail(str(exc))


@contextmanager
def _runner_config(agent: str | Adapter, timeout: float, fsync: bool, keep: bool, spawn: str = "fork",
                   work: Path | None = None, coverage_dir: Path | None = None,
                   resolved: Adapter | None = None) -> Iterator[RunnerConfig]:
    """`agent` as the user named it (recorded in results), or an adapter; `resolved`: the
    adapter a caller already resolved from that name (so it is looked up once)."""
    adapter = resolved or (_adapter(agent) if isinstance(agent, str) else agent)
    # Under --line-coverage (refused by `run` for an agent without a Python entry) the agent is
    # not preloaded: code that ran at import time in the zygote would count as never run in the
    # children that coverage measures.
    preload = (["coverage", "crashmatrix.harness.execution.covered"] if coverage_dir
               else list(adapter.python.preload) if adapter.python else None)
    # The zygote starts first, before this process has any thread, so it forks clean children.
    spawner = make_spawner(SpawnMode(spawn), preload)
    try:
        with FakeProvider() as provider, scratch_dir(prefix="crashmatrix-") as tmp:
            yield RunnerConfig(adapter=adapter, provider=provider, work_root=work or Path(tmp),
                               case_timeout_s=timeout, fsync=fsync, keep=keep, spawner=spawner,
                               coverage_dir=coverage_dir,
                               agent_ref=agent if isinstance(agent, str) else None)
    finally:
        spawner.close()


common_scenarios = [
    click.option("--scenario", "names", multiple=True, metavar="NAME",
                 help="Scenario to run (repeatable; default: every built-in and --scenarios one)."),
    click.option("--scenarios", "dirs", multiple=True, metavar="DIR",
                 type=click.Path(file_okay=False), help="Also load scenarios from DIR (repeatable)."),
    click.option("--agent", default=DEFAULT_AGENT, show_default=True,
                 help="Adapter of the agent under test: a registered name (crashmatrix.adapters "
                      "entry points: durable-agent, messages-only, ...) or mutant:NAME."),
    click.option("--timeout", default=60.0, show_default=True, metavar="S",
                 help="Per-case deadline; an agent that exceeds it is a liveness violation."),
    click.option("--fsync", type=click.Choice(["on", "off"]), default="off", show_default=True,
                 help="The agent's fsync setting (off is faster; SIGKILL does not lose written data)."),
    click.option("--spawn", type=click.Choice(["fork", "fresh"]), default="fork", show_default=True,
                 help="fork: incarnations fork from a pre-imported zygote; fresh: a new interpreter each."),
]


def with_common(fn: Any) -> Any:
    for option in reversed(common_scenarios):
        fn = option(fn)
    return fn


@click.command("run")
@with_common
@click.option("--depth", default=1, show_default=True, type=click.IntRange(1, 3),
              help="1: crash once at every event; 2: also crash again at every event of recovery.")
@click.option("--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option("--shard", metavar="K/N", help="Run only shard K of N (combine with `merge`).")
@click.option("--out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary object on stdout.")
@click.option("--keep", is_flag=True, help="Keep every case's session and workspace under OUT/cases.")
@click.option("--require-coverage", is_flag=True,
              help="Fail (exit 1) when a recovery branch the agent declares was never reached.")
@click.option("--line-coverage", is_flag=True,
              help="Measure line and branch coverage of the agent's code in recovery incarnations "
                   "(coverage.py); HTML in OUT/coverage.")
@click.option("--overwrite", is_flag=True,
              help="Replace result files in OUT even when no crashmatrix run wrote them there.")
def run(names: tuple[str, ...], dirs: tuple[str, ...], agent: str, timeout: float, fsync: str,
        spawn: str, depth: int, jobs: int, shard: str | None, out: str, as_json: bool, keep: bool,
        require_coverage: bool, line_coverage: bool, overwrite: bool) -> None:
    """Run the crash matrix: kill the agent at every probe event, recover, verify."""
    try:
        shard_spec = parse_shard(shard) if shard else None
    except ValueError as exc:
        fail(str(exc))
        return
    scenarios = _scenarios(names, dirs)
    for s in scenarios:
        if s.matrix.max_depth is not None and s.matrix.max_depth < depth:
            click.echo(f"crashmatrix: {s.name}: schedules capped at depth {s.matrix.max_depth} by "
                       f"its [matrix] max_depth ({s.source})", err=True)
    out_dir = Path(out)
    _claim_out(out_dir, overwrite)
    adapter = _adapter(agent)
    _require(adapter, scenarios)
    if line_coverage and adapter.python is None:
        # Refused before anything in --out is touched: earlier results stay as they were.
        fail(f"--line-coverage measures a Python agent; agent {adapter.name!r} has no Python entry point")
    declared = list(adapter.declared_branches())
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RUN_FILE).write_text(json.dumps({
        "agent": agent, "declared_branches": declared, "depth": depth, "fsync": fsync == "on",
        "spawn": spawn, "scenarios": [s.name for s in scenarios], "shard": shard,
    }, indent=2) + "\n", encoding="utf-8")
    writer = ResultsWriter(out_dir / RESULTS_FILE)
    progress = Progress()

    def on_result(result: CaseResult, known: int) -> None:
        # Written, not kept: a long matrix holds no results in memory while it runs.
        writer.write(result)
        progress.update(result.ok, known)

    interrupted = False
    coverage_dir = out_dir / "coverage-data" if line_coverage else None
    if coverage_dir is not None:
        shutil.rmtree(coverage_dir, ignore_errors=True)
        coverage_dir.mkdir(parents=True)
    with _runner_config(agent, timeout, fsync == "on", keep, spawn,
                        work=(out_dir / "cases") if keep else None,
                        coverage_dir=coverage_dir, resolved=adapter) as runner_config:
        matrix = Matrix(MatrixConfig(scenarios=scenarios, runner=runner_config, depth=depth,
                                     jobs=jobs, shard=shard_spec, scenario_dirs=list(dirs)))
        try:
            matrix.run(on_result)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            progress.close()
            writer.close()
    lines = combine_and_report(coverage_dir, out_dir) if coverage_dir is not None else None
    if lines is not None:
        click.echo(f"line+branch coverage of the agent in recovery incarnations: {lines.percent}% "
                   f"({lines.data_files} recoveries; HTML: {lines.html_dir}/index.html)", err=True)
    results = load_results(out_dir / RESULTS_FILE) if progress.done else []
    if results:
        write_reports(results, out_dir, declared, os.environ.get("GITHUB_STEP_SUMMARY") or None)
    if as_json:
        click.echo(json.dumps(summary(results, str(out_dir)), ensure_ascii=False))
    else:
        click.echo(render_summary(results, str(out_dir / RESULTS_FILE)))
    if interrupted:
        click.echo(f"crashmatrix: interrupted: {len(results)} finished cases kept in "
                   f"{out_dir / RESULTS_FILE}", err=True)
        sys.exit(int(Exit.HARNESS))
    if any(r.verdict is Verdict.ERROR for r in results):
        sys.exit(int(Exit.HARNESS))
    missing = coverage_failures(results, declared) if require_coverage else []
    if missing:
        click.echo(f"crashmatrix: error: {coverage_message(missing)}", err=True)
    sys.exit(int(Exit.HELD if all(r.ok for r in results) and not missing else Exit.VIOLATIONS))


@click.command("list")
@with_common
@click.option("--cases", is_flag=True, help="Record each scenario and list its single-crash case ids.")
@click.option("--agents", is_flag=True, help="List the registered agents: name, origin, capabilities.")
def list_(names: tuple[str, ...], dirs: tuple[str, ...], agent: str, timeout: float, fsync: str,
          spawn: str, cases: bool, agents: bool) -> None:
    """List scenarios (with --cases, their case ids; with --agents, the agents instead)."""
    if agents:
        rows = [(a.name, a.origin, a.value, ", ".join(a.capabilities)) for a in list_agents()]
        if ":" in agent:  # an agent named by path is listed too, so it can be checked
            path = _adapter(agent)
            rows.append((path.name, "path", agent, ", ".join(sorted(c.value for c in path.capabilities))))
        click.echo(tabulate(rows, headers=["agent", "origin", "from", "capabilities"]))
        return
    scenarios = _scenarios(names, dirs)
    if not cases:
        for s in scenarios:
            click.echo(f"{s.name:18} {s.description}")
        return
    adapter = _adapter(agent)
    _require(adapter, scenarios)
    with _runner_config(agent, timeout, fsync == "on", False, spawn, resolved=adapter) as cfg:
        for s in scenarios:
            for case in _enumerate(cfg, s):
                click.echo(case.case_id)


def _enumerate(cfg: RunnerConfig, scenario: Scenario) -> list[Case]:
    obs = CaseRunner(cfg).run(Case(scenario.name), scenario)
    first = [e.point for e in obs.incarnations[0].events] if obs.incarnations else []
    return [Case(scenario.name), *single_crash_cases(scenario.name, first, faults_for(cfg.adapter))]


@click.command("repro")
@click.argument("case_id", required=False)
@with_common
@click.option("--keep", is_flag=True, help="Keep the case's session and workspace and print where.")
@click.option("--file", "repro_file", type=click.Path(dir_okay=False),
              help="Replay a repro file written by `crashmatrix explore` (scenario, case and agent).")
def repro(case_id: str | None, names: tuple[str, ...], dirs: tuple[str, ...], agent: str, timeout: float,
          fsync: str, spawn: str, keep: bool, repro_file: str | None) -> None:
    """Re-run exactly one case and print its timeline."""
    if repro_file is not None:
        _repro_file(Path(repro_file), timeout, fsync == "on", spawn, keep)
        return
    if case_id is None:
        fail("give a CASE_ID, or --file PATH")
        return
    try:
        case = Case.parse(case_id)
    except CaseIdError as exc:
        fail(str(exc))
        return
    known = {s.name: s for s in _scenarios(names, dirs)}
    scenario = known.get(case.scenario)
    if scenario is None:
        close = difflib.get_close_matches(case.scenario, list(known), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(sorted(known))}"
        fail(f"unknown scenario {case.scenario!r} in case id {case_id!r}{hint}")
        return
    work = Path(tempfile.mkdtemp(prefix="crashmatrix-repro-")) if keep else None
    with _runner_config(agent, timeout, fsync == "on", keep, spawn, work=work) as cfg:
        _require(cfg.adapter, [scenario])
        try:
            check_faults(case, cfg.adapter)
        except CaseIdError as exc:
            fail(f"case id {case_id!r}: {exc}")
        if case.schedule:
            ids = [c.case_id for c in _enumerate(cfg, scenario)]
            first = Case(case.scenario, case.schedule[:1]).case_id
            if first not in ids:
                close = difflib.get_close_matches(first, ids, n=3, cutoff=0.5)
                fail(f"unknown case id {case_id!r}: scenario {case.scenario} has no crash point "
                     f"{case.schedule[0].token()}" + (f"; nearest: {', '.join(close)}" if close else ""))
        runner = CaseRunner(cfg)
        obs = runner.run(case, scenario)
        result = evaluate(obs, scenario, fsync=cfg.fsync, agent=cfg.agent,
                          scenario_dirs=list(dirs), duration_ms=0.0)
    for line in render_timeline(obs, result):
        click.echo(line)
    if work is not None:
        click.echo(f"kept: {work}")
    sys.exit(int(Exit.HELD if result.ok else Exit.VIOLATIONS))


def _repro_file(path: Path, timeout: float, fsync: bool, spawn: str, keep: bool) -> None:
    from crashmatrix.harness.explore import ReproFileError, read_repro, run_repro  # noqa: PLC0415 - rare path

    try:
        saved = read_repro(path)
        mutant = MutantName(saved.mutant) if saved.mutant else None
    except (ReproFileError, ScenarioError) as exc:
        fail(str(exc))
        return
    except ValueError:
        fail(f"{path}: field 'mutant': unknown mutant {saved.mutant!r}")
        return
    adapter: Adapter = MutantAdapter(mutant) if mutant else _adapter(saved.agent)
    _require(adapter, [saved.scenario])
    try:
        check_faults(saved.case, adapter)
    except CaseIdError as exc:
        fail(f"{path}: {exc}")
    work = Path(tempfile.mkdtemp(prefix="crashmatrix-repro-")) if keep else None
    with _runner_config(adapter, timeout, fsync, keep, spawn, work=work) as cfg:
        obs, result = run_repro(saved, cfg)
    for line in render_timeline(obs, result):
        click.echo(line)
    if work is not None:
        click.echo(f"kept: {work}")
    sys.exit(int(Exit.HELD if result.ok else Exit.VIOLATIONS))


@click.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("--out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.option("--overwrite", is_flag=True,
              help="Replace result files in OUT even when no crashmatrix run wrote them there.")
def merge_(inputs: tuple[str, ...], out: str, as_json: bool, overwrite: bool) -> None:
    """Combine the results of several shards into one results.jsonl."""
    _claim_out(Path(out), overwrite)
    try:
        merged = merge(load_results(Path(p)) for p in inputs)
    except ResultsError as exc:
        fail(str(exc))
        return
    agents = sorted({r.agent for r in merged})
    if len(agents) > 1:
        fail(f"the shards tested different agents ({', '.join(agents)}); merge results of one agent")
    out_dir = Path(out)
    # The first shard's run description travels with the merge, so `report` needs no telling.
    runs = [Path(p) / RUN_FILE if Path(p).is_dir() else Path(p).parent / RUN_FILE for p in inputs]
    first_run = next((r for r in runs if r.exists()), None)
    if first_run is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        if first_run.resolve() != (out_dir / RUN_FILE).resolve():
            shutil.copyfile(first_run, out_dir / RUN_FILE)
    writer = ResultsWriter(out_dir / RESULTS_FILE)
    for r in merged:
        writer.write(r)
    writer.close()
    if as_json:
        click.echo(json.dumps(summary(merged, str(out_dir)), ensure_ascii=False))
    else:
        click.echo(render_summary(merged, str(out_dir / RESULTS_FILE)))
    sys.exit(int(Exit.HELD if all(r.ok for r in merged) else Exit.VIOLATIONS))


COMMANDS = [run, list_, repro, merge_, report]
