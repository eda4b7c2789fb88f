"""`crashmatrix run`: the crash matrix, its results and reports (click wiring at the edge). The
other matrix commands (list_cmd.py, repro.py, report.py) are registered by main.py, each loaded
only when named."""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from crashmatrix.harness.adapters.identity import identity
from crashmatrix.harness.adapters.interface import Adapter, Capability
from crashmatrix.harness.cli.common_options import selected_faults, with_common
from crashmatrix.harness.cli.coverage_options import coverage_source_of, measured_name, python_only
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.matrix_setup import (
    adapter_named,
    fitting,
    fsync_default,
    printed_dirs,
    runner_config,
    scenarios_named,
)
from crashmatrix.harness.cli.out_claim import DEFAULT_OUT, claim_out
from crashmatrix.harness.cli.out_lock import lock_out
from crashmatrix.harness.cli.portable import found_from_here, run_dir
from crashmatrix.harness.cli.progress import Progress
from crashmatrix.harness.cli.report import (
    coverage_failures,
    coverage_message,
    load_results,
    say_completeness,
)
from crashmatrix.harness.cli.traced_modes import black_box_usable, syscalls_usable
from crashmatrix.harness.cli.verdict_exit import baseline_of, refuse_uncrashed, verdict_against
from crashmatrix.harness.enumeration import parse_shard
from crashmatrix.harness.execution.arrivals import with_arrivals
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.netns import exposure
from crashmatrix.harness.execution.scratch_watch import watches
from crashmatrix.harness.execution.trees import remove_tree
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import (
    RESULTS_FILE,
    CaseResult,
    ResultsError,
    ResultsWriter,
    Verdict,
    summary,
)
from crashmatrix.harness.records.run_record import (
    FORMAT,
    RUN_FILE,
    Completion,
    LineCoverageRecord,
    RunEnd,
    RunFileError,
    RunOptions,
    RunRecord,
    ScenarioStates,
    StatesRecord,
    judge,
    read_run,
    run_notes,
    write_run,
)
from crashmatrix.harness.records.terminal_text import terminal_safe
from crashmatrix.harness.records.uncrashed import refused_files, syscall_refusals
from crashmatrix.harness.verify import CHECKS
from crashmatrix.reports.facts import run_facts
from crashmatrix.reports.header import header
from crashmatrix.reports.terminal import render as render_summary
from crashmatrix.reports.write import write_reports
from crashmatrix.scenarios.arrivals import parse as arrival_of
from crashmatrix.scenarios.model import Scenario

if TYPE_CHECKING:
    from crashmatrix.harness.execution.line_coverage import LineCoverage
    from crashmatrix.harness.execution.states_tally import Tally


def _states_usable(adapter: Adapter, line_coverage: bool) -> None:
    """--states needs an agent whose recovery reads only the case tree (exit 2 otherwise)."""
    if Capability.STATE_IN_TREE not in adapter.capabilities:
        fail(f"--states starts cases from recorded crash states, which is sound only for an agent whose "
             f"recovery reads nothing but its case tree and the provider; agent {adapter.name!r} does "
             "not declare 'state-in-tree': run without --states")
    if line_coverage:
        fail("--states with --line-coverage: shared recoveries would be measured once for many cases; "
             "measure lines without --states")


def states_record(tally: Tally, settles_reused: int = 0, resumed: int = 0) -> StatesRecord:
    """What run.json keeps of a --states run's tally: the counts, per scenario that had any."""
    names = tally.points.keys() | tally.distinct.keys() | tally.frozen.keys() | tally.hosts.keys()
    return StatesRecord(
        scenarios={s: ScenarioStates(points=tally.points[s], states=tally.distinct[s],
                                     second_process_points=tally.frozen[s], hosts=tally.hosts[s])
                   for s in sorted(names)},
        settles_reused=settles_reused, resumed=resumed)


def states_line(record: StatesRecord) -> str:
    """Per scenario, how many crash points started from states and how many distinct states."""
    parts = [f"{name} {s.points} crash points -> {s.states} states" + (
        f", {s.second_process_points} second-process points -> {s.hosts} "
        f"host{'' if s.hosts == 1 else 's'}" if s.hosts else "")
        for name, s in sorted(record.scenarios.items()) if s.points or s.hosts]
    return ("; ".join(parts) or "no case started from a crash state") + (
        f"; {record.settles_reused} settle runs reused (a byte-identical final state settled before)")


def _black_box_scenarios(scenarios: list[Scenario], named: bool) -> list[Scenario]:
    """The scenarios a black-box run can drive: one that delivers inputs or cancels does so at
    probe events, which a black-box agent never reports. Named ones are refused (exit 2); of the
    default set they are left out, said on stderr."""
    timed = [s for s in scenarios if s.inputs or s.cancels]
    if not timed:
        return scenarios
    names = ", ".join(s.name for s in timed)
    if named:
        fail(f"--black-box: scenario {names} delivers inputs or cancels at probe events, which an "
             "agent without probes never reports; choose scenarios without them")
    click.echo(f"crashmatrix: --black-box: left out {names}: they deliver inputs or cancels at probe "
               "events, which an agent without probes never reports", err=True)
    return [s for s in scenarios if s not in timed]


@dataclass
class _Tally:
    """What run.json says at the end: cases enumerated, results per scenario, lines written."""

    known: int = 0
    per_scenario: Counter[str] = field(default_factory=Counter)
    written: int = 0

    def count(self, result: CaseResult, known: int) -> None:
        self.known = known
        self.per_scenario[result.scenario] += 1


class _Resumed(Matrix):
    """A matrix in which a case with a saved result is not run again: the saved result stands in,
    and the matrix enumerates the cases after it from its trace exactly as from a fresh one (the
    enumeration stays the matrix's own; this only chooses what answers each case)."""

    def __init__(self, config: MatrixConfig, saved: Mapping[str, CaseResult]) -> None:
        super().__init__(config)
        self.saved = saved

    def run_case(self, case: Case) -> CaseResult:
        saved = self.saved.get(case.case_id)
        return saved if saved is not None else super().run_case(case)


def _shown(value: object) -> str:
    return json.dumps(list(value) if isinstance(value, tuple) else value)


def _saved_results(out_dir: Path, options: RunOptions) -> tuple[RunRecord, dict[str, CaseResult]]:
    """For --resume: the run.json of the run to continue and its results by case id; refused
    (exit 2, nothing touched) unless this command would run the same matrix."""
    path = out_dir / RUN_FILE
    try:
        previous = read_run(path)
    except RunFileError as exc:
        fail(f"--resume: {exc}")
    if previous is None:
        fail(f"--resume: {path} does not exist, so there is no run to continue in {out_dir}; "
             "run without --resume to start one")
    unrecorded = previous.options.unrecorded()
    if previous.format < FORMAT or unrecorded:
        fail(f"--resume: {path} does not record {', '.join(unrecorded) or 'its completeness'} (written by "
             "an older crashmatrix), so it cannot be checked to be the same matrix; run without --resume")
    differ = previous.options.differences(options)
    if differ:
        fail(f"--resume: this is not the run in {path}: "
             + "; ".join(f"{name} is {_shown(old)} there and {_shown(new)} here" for name, old, new in differ)
             + "; resume with the options it was started with, or start anew without --resume")
    results_path = out_dir / RESULTS_FILE
    if not results_path.exists() or results_path.stat().st_size == 0:
        return previous, {}  # interrupted before its first result
    try:
        saved = load_results(results_path)
    except ResultsError as exc:
        fail(f"--resume: {exc}")
    # Held in memory, unlike fresh results: the matrix enumerates the cases after each saved one
    # from its trace.
    return previous, {r.case: r for r in saved}


@click.command("run")
@with_common
@click.option("--depth", default=1, show_default=True, type=click.IntRange(1, 3),
              help="1: crash once at every event; 2: also crash again at every event of recovery.")
@click.option("--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 64))
@click.option("--shard", metavar="K/N", help="Run only shard K of N (combine with `merge`).")
@click.option("--case", "only_cases", metavar="CASE_ID", multiple=True,
              help="Run only this crash case (repeatable; its scenario's crash-free recording runs "
                   "too; at --depth 2 name a deeper case's parent as well, and for a variant "
                   "(power-subsets:MASK) the case without it): a slice of a slow matrix, e.g. the "
                   "cases a CI job keeps an eye on.")
@click.option("--out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary object on stdout.")
@click.option("--keep", is_flag=True,
              help="Keep every case's session and workspace under OUT/cases (with --states, a case "
                   "that shared another's recovery has no tree of its own: that case's is kept).")
@click.option("--require-coverage", is_flag=True,
              help="Fail (exit 1) when a recovery branch the agent declares was never reached.")
@click.option("--baseline", "baseline_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Known failures (`crashmatrix baseline` writes them): listed cases that fail "
                   "again do not fail the run; a new failure does, and so does a listed case that "
                   "now holds (remove it from FILE).")
@click.option("--line-coverage", is_flag=True,
              help="Measure line and branch coverage of the agent's code in recovery incarnations "
                   "(coverage.py); HTML in OUT/coverage.")
@click.option("--line-coverage-source", "coverage_sources", multiple=True, metavar="PKG_OR_DIR",
              help="With --line-coverage: measure this package or directory (repeatable) instead "
                   "of the adapter's guess (its coverage_source, or its module's top package).")
@click.option("--overwrite", is_flag=True,
              help="Replace result files in OUT even when no crashmatrix run wrote them there.")
@click.option("--resume", is_flag=True,
              help="Continue the unfinished run in OUT (give the same options): cases that have a "
                   "result are not run again; the others are added to its results.")
@click.option("--states", is_flag=True,
              help="Start each kill and torn case from the crash state its parent's run recorded, "
                   "and share one recovery among cases whose states are byte-identical (faster; for "
                   "an agent declaring 'state-in-tree').")
@click.option("--arrivals", is_flag=True,
              help="Also deliver each scenario input and cancel at every kind of point its run "
                   "passes before its last inbox poll, each point a scenario of its own "
                   "(SCENARIO~ITEM@KIND:LABEL), crash points and all (docs/invariants.md, "
                   "\"Arrival timing\").")
@click.option("--syscalls", is_flag=True,
              help="Also crash (kill) at every write, sync, truncate, rename and unlink of a session "
                   "file that no probe event already stands before, in the recording and, with "
                   "--depth 2, in each recovery; the probes stay on, so every invariant is judged "
                   "(case ids sNN:syscall:file; strace; docs/architecture.md, \"System-call points\").")
@click.option("--audit-states", "audit_states", default=0.0, type=click.FloatRange(0, 1), metavar="P",
              help="With --states: re-run this share of the cases started from states as real "
                   "kills; a difference makes the case nondeterministic.")
def run(names: tuple[str, ...], dirs: tuple[str, ...], agent: str, timeout: float, max_events: int,
        fsync_given: str | None, fault_names: tuple[str, ...], spawn: str, depth: int, jobs: int,
        shard: str | None, out: str, as_json: bool, keep: bool,
        require_coverage: bool, line_coverage: bool, overwrite: bool, resume: bool,
        black_box: bool, states: bool, audit_states: float, only_cases: tuple[str, ...],
        baseline_file: str | None, coverage_sources: tuple[str, ...], arrivals: bool,
        syscalls: bool) -> None:
    """Run the crash matrix: kill the agent at every probe event, recover, verify."""
    if coverage_sources and not line_coverage:
        fail("--line-coverage-source names what --line-coverage measures; give --line-coverage too")
    coverage_source = coverage_source_of(coverage_sources)
    known = baseline_of(baseline_file)  # read first: a bad file is refused before anything runs
    try:
        shard_spec = parse_shard(shard) if shard else None
    except ValueError as exc:
        fail(str(exc))
        return
    try:
        sliced = {Case.parse(case_id).scenario for case_id in only_cases}
    except ValueError as exc:
        fail(f"--case: {exc}")
        return
    if only_cases and shard_spec is not None:
        fail("--case with --shard: a named case in another shard would silently not run; give one")
    scenarios = scenarios_named(names, dirs)
    if only_cases:
        # A case of an arrival variant names its scenario: run it without --scenario as well.
        variants = tuple(sorted(n for n in sliced - {s.name for s in scenarios} if arrival_of(n)))
        if variants:
            scenarios += scenarios_named(variants, dirs)
        absent = sorted(sliced - {s.name for s in scenarios})
        if absent:
            fail(f"--case: scenario {absent[0]!r} is not among those selected "
                 f"({', '.join(s.name for s in scenarios)})")
        scenarios = [s for s in scenarios if s.name in sliced]  # the others' recordings: no use
    for s in scenarios:
        if s.matrix.max_depth is not None and s.matrix.max_depth < depth:
            click.echo(f"crashmatrix: {s.name}: schedules capped at depth {s.matrix.max_depth} by "
                       f"its [matrix] max_depth ({s.source})", err=True)
    out_dir = Path(out)
    adapter = adapter_named(agent)
    scenarios = fitting(adapter, scenarios, named=bool(names))
    where = run_dir() if found_from_here(agent) else None
    selected = selected_faults(adapter, fault_names)
    if black_box and arrivals:
        fail("--arrivals with --black-box: arrival points are probe events, and a black-box agent "
             "runs without them")
    if black_box and syscalls:
        fail("--syscalls with --black-box: --syscalls keeps the probes on, --black-box turns them "
             "off; a black-box matrix already crashes at the store calls of its recording")
    if syscalls:
        syscalls_usable(adapter, selected)
    if black_box:
        black_box_usable(adapter, selected, depth)
        scenarios = _black_box_scenarios(scenarios, named=bool(names))
        if require_coverage:
            fail("--require-coverage with --black-box: recovery branches are reported by probes, "
                 "and a black-box agent runs without them")
    fsync = "on" if fsync_default(fsync_given, selected, black_box) else "off"
    if states:
        _states_usable(adapter, line_coverage)
    elif audit_states:
        fail("--audit-states P checks the cases --states starts from crash states; give --states too")
    options = RunOptions(agent=agent, depth=depth, fsync=fsync == "on", timeout=timeout, spawn=spawn,
                         max_events=max_events, blackbox=black_box, states=states,
                         scenarios=tuple(s.name for s in scenarios),
                         shard=f"{shard_spec[0]}/{shard_spec[1]}" if shard_spec else None,
                         faults=selected, cases=tuple(sorted(set(only_cases))) or None,
                         line_coverage_source=coverage_sources or None, arrivals=arrivals,
                         syscalls=syscalls, syscall_settles=syscalls)
    if not resume:
        claim_out(out_dir, overwrite)  # only reads: a directory refused gets no lock file
    lock_out(out_dir)  # before anything in --out is written (or, resuming, read)
    if resume:
        previous, saved = _saved_results(out_dir, options)
    else:
        previous, saved = None, {}
    if line_coverage:
        python_only(adapter)  # refused before anything in --out is touched
    declared = list(adapter.declared_branches())
    who = identity(agent, adapter)
    # Written first, marked incomplete: a run that never gets to say it finished stays incomplete.
    started = RunRecord(declared_branches=tuple(declared), options=options,
                        known=previous.known if previous else None, done=len(saved), complete=False,
                        network_exposed=exposure(), agent_origin=who.origin, agent_framework=who.framework)
    write_run(out_dir / RUN_FILE, started)
    writer = ResultsWriter(out_dir / RESULTS_FILE, append=resume)
    progress = Progress()
    began = time.monotonic()  # the run's wall clock, said in the summary
    tally = _Tally()

    def on_result(result: CaseResult, known: int) -> None:
        # Written, not kept: a long matrix holds no results in memory while it runs. A saved
        # result (--resume) is in the file already.
        ran = result is not saved.get(result.case)
        if ran:
            writer.write(result)
            tally.written += 1
        tally.count(result, known)
        # `matrix` is bound below, before the first result: whether `known` is the total yet.
        progress.update(result.ok, known, final=matrix.enumerated, ran=ran)

    interrupted = False
    coverage_dir = out_dir / "coverage-data" if line_coverage else None
    if coverage_dir is not None:
        if not resume:  # a resumed run adds to what the cases it does not re-run measured
            remove_tree(coverage_dir)
        coverage_dir.mkdir(parents=True, exist_ok=True)
    with runner_config(agent, timeout, fsync == "on", keep, spawn,
                       work=(out_dir / "cases") if keep else None,
                       coverage_dir=coverage_dir, resolved=adapter,
                       max_events=max_events, blackbox=black_box,
                       coverage_source=coverage_source, syscalls=syscalls) as runner_cfg:
        if arrivals:
            scenarios = with_arrivals(scenarios, runner_cfg, jobs, note=lambda line: click.echo(
                f"crashmatrix: --arrivals: {line}", err=True))
        config = MatrixConfig(scenarios=scenarios, runner=runner_cfg, depth=depth,
                              jobs=jobs, shard=shard_spec, scenario_dirs=printed_dirs(dirs, where),
                              run_dir=where,
                              faults=selected, states=states, audit_states=audit_states,
                              only=frozenset(only_cases) or None)
        matrix = _Resumed(config, saved) if saved else Matrix(config)
        try:
            matrix.run(on_result)
        except KeyboardInterrupt as exc:
            interrupted = True
            # Which signal it was (Interrupted names SIGINT or SIGTERM), on a line of its own:
            # the progress line is ended first, and only once.
            progress.close()
            progress.enabled = False
            click.echo(f"crashmatrix: {exc or 'interrupted by SIGINT'}: every agent killed; "
                       "writing what finished", err=True)
        finally:
            progress.close()
            writer.close()
        # Saved cases (--resume) ran in the run this one continues: in none of the counts.
        for failed in matrix.baseline_failed:
            click.echo(f"crashmatrix: {failed.scenario}: the crash-free run already fails "
                       f"({', '.join(failed.invariants)}): without a crash it does not do the task "
                       f"or does not end, so its crash cases were not run; fix that first "
                       f"({failed.repro})"
                       + "".join(f"\n  {v['invariant']}: {v['message']}" for v in failed.violations[:5]),
                       err=True)
        shared = (None if matrix.states is None
                  else states_record(matrix.states.tally, matrix.states.settled.reused, len(saved)))
        if shared is not None:
            click.echo(f"crashmatrix: --states: {states_line(shared)}", err=True)
            for line in matrix.states.tally.unkept_lines() if matrix.states is not None else []:
                click.echo(f"crashmatrix: --states: {line}", err=True)
    if only_cases and not interrupted:
        known_ids = matrix.enumerated_ids | {f"{s.name}/none" for s in scenarios}
        unknown = sorted(set(only_cases) - known_ids)
        if unknown:
            failed_first = {f.scenario for f in matrix.baseline_failed}
            why = ("its scenario's crash-free run failed, so no case of it was enumerated"
                   if Case.parse(unknown[0]).scenario in failed_first else
                   f"no such case in this matrix ({len(matrix.enumerated_ids)} cases enumerated, e.g. "
                   f"{min(matrix.enumerated_ids, default='none')}; at --depth 2 a deeper case runs "
                   "only when its parent is named too, and a variant (power-subsets:MASK) only when "
                   "its case without the mask is"
                   + ("; a case with an sNN or fNN step needs --syscalls" if not syscalls and any(
                       s.syscall for s in Case.parse(unknown[0]).schedule) else "") + ")")
            fail(f"--case {unknown[0]}: {why}; `crashmatrix run` without --case lists them all")
        click.echo(f"crashmatrix: note: --case: a slice of the matrix, {len(set(only_cases))} named "
                   "case(s) beside the recordings; every other case was left out", err=True)
    lines: LineCoverage | None = None
    unmeasured: str | None = None
    if coverage_dir is not None:
        # deferred: ~1 ms of every start; only --line-coverage measures
        from crashmatrix.harness.execution.line_coverage import (  # noqa: PLC0415
            LineCoverage,
            Unmeasured,
            combine_and_report,
        )

        measured = combine_and_report(coverage_dir, out_dir, measured_name(adapter, coverage_sources))
        lines = measured if isinstance(measured, LineCoverage) else None
        unmeasured = measured.message if isinstance(measured, Unmeasured) else None
    # Enumeration is known only once the matrix ran to its end; until then `known` is a floor.
    ended = replace(started, expected=None if interrupted else dict(tally.per_scenario),
                    known=tally.known or started.known, done=len(saved) + tally.written,
                    complete=not interrupted, ended=RunEnd.INTERRUPTED if interrupted else RunEnd.FINISHED,
                    line_coverage=None if lines is None else LineCoverageRecord(
                        percent=lines.percent, recoveries=lines.data_files,
                        html=(lines.html_dir / "index.html").relative_to(out_dir).as_posix(),
                        source=lines.source),
                    line_coverage_unmeasured=unmeasured,
                    crash_states=shared)
    write_run(out_dir / RUN_FILE, ended)
    results = load_results(out_dir / RESULTS_FILE) if progress.done or saved else []
    completeness = judge(ended, results)
    reports = (write_reports(results, out_dir, declared, os.environ.get("GITHUB_STEP_SUMMARY") or None,
                             completeness=completeness, lines=ended.line_coverage,
                             states=ended.crash_states, notes=run_notes(ended),
                             header=header(results, list(CHECKS), ended)) if results else [])
    files = [out_dir / RESULTS_FILE, out_dir / RUN_FILE, *reports,
             *([lines.html_dir / "index.html"] if lines is not None else [])]
    facts = run_facts(results, list(CHECKS), declared, depth, files, time.monotonic() - began,
                      ended.line_coverage)
    if as_json:
        click.echo(json.dumps(summary(results, str(out_dir)) | facts.to_json(), ensure_ascii=False))
        say_completeness(completeness)
    else:
        click.echo(terminal_safe(render_summary(results, str(out_dir / RESULTS_FILE), completeness, facts)))
    if unmeasured is not None:  # asked for, so never silent: why, and what to do
        click.echo(f"--line-coverage measured nothing: {unmeasured}", err=True)
    if interrupted:
        click.echo(f"crashmatrix: interrupted: {len(results)} finished cases kept in "
                   f"{out_dir / RESULTS_FILE}; to run the rest, repeat the command with --resume", err=True)
    if interrupted or completeness.state is Completion.INCOMPLETE:
        sys.exit(int(Exit.HARNESS))
    if any(r.verdict is Verdict.ERROR for r in results):
        sys.exit(int(Exit.HARNESS))
    for w in watches():
        if w.cases_low:
            biggest = (f"; the largest case tree measured then was {w.biggest[0]}'s, {w.biggest[1]} bytes"
                       if w.biggest else "")
            click.echo(f"crashmatrix: note: the scratch filesystem {w.path} ran low on space during "
                       f"{w.cases_low} case(s){biggest}: cases running at the same time share it, so "
                       "one agent filling it fails another's writes (each such case's note says so)",
                       err=True)
    for name, threaded in refused_files(results).items():
        named = ", ".join(f"{f} ({n} calls)" for f, n in sorted(threaded.items()))
        click.echo(f"crashmatrix: note: scenario {name}: black-box made no crash point on {named}: "
                   "stored to from several threads, whose calls strace counts per thread, so no "
                   "call can be named that another run repeats", err=True)
    for name, on_files in syscall_refusals(results).items():
        click.echo(f"crashmatrix: note: scenario {name}: --syscalls made no system-call point on "
                   f"{', '.join(on_files)}: stored to from another thread or process too (their calls "
                   "are not the main thread's to count), and its recording got no power-loss point "
                   "at a system call", err=True)
    # A shard may hold only a scenario's recording: its crash cases are other shards' (merge judges).
    if shard_spec is None:
        refuse_uncrashed(results)
    missing = coverage_failures(results, declared) if require_coverage else []
    if missing:
        click.echo(f"crashmatrix: error: {coverage_message(missing)}", err=True)
    sys.exit(int(verdict_against(results, known, baseline_file, bool(missing))))
