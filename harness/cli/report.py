"""`crashmatrix report`: regenerate the report files from saved results, and check branch coverage."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from crashmatrix.harness.adapters.registry import AgentChoiceError, resolve_agent
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.records.results import (
    CaseResult,
    ResultsError,
    load,
    resolve_results_path,
    whole_lines,
)
from crashmatrix.harness.records.run_record import (
    Completeness,
    Completion,
    RunRecord,
    is_str_list,
    judge,
    read_run,
    run_file_for,
    run_notes,
)
from crashmatrix.harness.verify import CHECKS
from crashmatrix.reports.coverage import unreached
from crashmatrix.reports.header import header
from crashmatrix.reports.write import write_reports


def coverage_failures(results: Sequence[CaseResult], declared: Sequence[str]) -> list[str]:
    """The declared recovery branches no case reached, in declared order (empty: all covered)."""
    return unreached(results, declared)


def coverage_message(missing: Sequence[str]) -> str:
    return (f"--require-coverage: {len(missing)} declared recovery branch(es) never reached: "
            + ", ".join(missing))


def _shape_error(r: CaseResult) -> str | None:
    """What makes a record unrenderable, or None; `load` checks JSON and verdict, not field types."""
    if not isinstance(r.case, str) or not isinstance(r.scenario, str) or not isinstance(r.repro, str):
        return "case, scenario and repro must be strings"
    if not isinstance(r.depth, int) or not isinstance(r.duration_ms, int | float):
        return "depth and duration_ms must be numbers"
    if not isinstance(r.violations, list) or not all(
            isinstance(v, dict) and isinstance(v.get("invariant"), str) for v in r.violations):
        return "violations must be a list of objects with an invariant id"
    if not is_str_list(r.branches):
        return "branches must be a list of strings"
    if not isinstance(r.trace, list) or not all(is_str_list(t) for t in r.trace):
        return "trace must hold a list of event strings per incarnation"
    for name in ("crashed_at", "exit_codes", "incarnation_ms"):
        value = getattr(r, name)
        if not isinstance(value, list) or not all(x is None or isinstance(x, int | float) for x in value):
            return f"{name} must be a list of numbers"
    if r.note is not None and not isinstance(r.note, str):
        return "note must be a string"
    if r.scenario_error is not None and not (
            isinstance(r.scenario_error, dict) and isinstance(r.scenario_error.get("message"), str)):
        return "scenario_error must be an object with a message"
    return _more_shape_errors(r)


def _more_shape_errors(r: CaseResult) -> str | None:
    """The fields a renderer reads beyond those above (issue 33, M2: a hand-edited file gave a
    traceback on each of these)."""
    if not isinstance(r.agent, str):
        return "agent must be a string"
    if not isinstance(r.fsync, bool):
        return "fsync must be true or false"
    if any(not isinstance(getattr(r, n), int) or isinstance(getattr(r, n), bool)
           for n in ("requests", "commits")):
        return "requests and commits must be integers"
    if not isinstance(r.not_applicable, list) or not all(
            isinstance(n, dict) and isinstance(n.get("invariant"), str) and isinstance(n.get("reason"), str)
            for n in r.not_applicable):
        return "not_applicable must be a list of objects with an invariant and a reason"
    if r.exercised is not None and not is_str_list(r.exercised):
        return "exercised must be a list of invariant ids"
    for name in ("store_calls", "syscall_points", "downstream"):
        value = getattr(r, name)
        if not isinstance(value, list) or not all(is_str_list(t) for t in value):
            return f"{name} must hold a list of strings per incarnation"
    if r.evidence is not None and not isinstance(r.evidence, dict):
        return "evidence must be an object"
    if r.policies is not None and not (isinstance(r.policies, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in r.policies.items())):
        return "policies must map tool names to policies"
    if r.agent_output is not None and not (isinstance(r.agent_output, list) and all(
            isinstance(o, dict) and isinstance(o.get("tail"), str) for o in r.agent_output)):
        return "agent_output must be a list of objects with a tail"
    return None


def _damage(path: Path) -> str | None:
    """The first line that is not a renderable case result, named as an editor numbers it, or
    that repeats a case an earlier line holds (a report would count it twice)."""
    seen: dict[str, int] = {}
    for line_no, raw in enumerate(whole_lines(path), 1):
        if not raw.strip():
            continue
        try:
            result = CaseResult.from_json(json.loads(raw.decode("utf-8")))
            why = _shape_error(result)
        except Exception as exc:  # any way a line can fail to be a record is damage
            why = f"{type(exc).__name__}: {exc}"
        if why is not None:
            return f"{path}: line {line_no}: not a case result ({why})"
        if result.case in seen:
            return (f"{path}: line {line_no}: case {result.case} again (line {seen[result.case]} "
                    "holds it); `crashmatrix merge` combines result files")
        seen[result.case] = line_no
    return None


def load_results(path: Path) -> list[CaseResult]:
    """`load`, plus the checks it leaves out (encoding, JSON that is not an object, field types)."""
    path = resolve_results_path(path)
    try:
        results = load(path)
    except ResultsError:
        raise
    except Exception as exc:  # load lets some damage escape as other errors; name the line
        raise ResultsError(_damage(path) or f"{path}: cannot read ({exc})") from None
    why = _damage(path)
    if why is not None:
        raise ResultsError(why)
    return results


def declared_branches(results_path: Path, results: Sequence[CaseResult],
                      record: RunRecord | None) -> list[str]:
    """From run.json beside the results when present, else from the adapter of the agent tested."""
    if record is not None:
        return list(record.declared_branches)
    agents = {r.agent for r in results}
    if len(agents) != 1:
        raise ResultsError(f"{results_path}: results of {len(agents)} agents ({', '.join(sorted(agents))}) "
                           "and no run.json to say which agent's recovery branches to report")
    try:
        # Whatever named the agent (a registered name, mutant:NAME, module:attr) names it again.
        return list(resolve_agent(agents.pop()).declared_branches())
    except AgentChoiceError as exc:
        raise ResultsError(f"{results_path}: {exc}; no run.json beside the results to read "
                           "the agent's declared recovery branches from") from None


@click.command("report")
@click.argument("source", metavar="RESULTS_OR_DIR", type=click.Path())
@click.option("--out", type=click.Path(file_okay=False),
              help="Where to write the reports (default: beside the results file).")
@click.option("--require-coverage", is_flag=True,
              help="Exit 1 when a declared recovery branch was never reached.")
def report(source: str, out: str | None, require_coverage: bool) -> None:
    """Regenerate summary.md, junit.xml and report.html from saved results (also merged shards)."""
    path = resolve_results_path(Path(source))
    try:
        results = load_results(path)
        record = read_run(run_file_for(path))
        declared = declared_branches(path, results, record)
    except ResultsError as exc:
        fail(str(exc), Exit.USAGE)
        return
    completeness = judge(record, results)
    out_dir = Path(out) if out else path.parent
    written = write_reports(results, out_dir, declared,
                            step_summary_path=os.environ.get("GITHUB_STEP_SUMMARY") or None,
                            completeness=completeness,
                            lines=record.line_coverage if record is not None else None,
                            results_dir=path.parent,
                            states=record.crash_states if record is not None else None,
                            notes=run_notes(record), header=header(results, list(CHECKS), record))
    for p in written:
        click.echo(f"wrote {p}")
    missing = coverage_failures(results, declared)
    if require_coverage and missing:
        click.echo(f"crashmatrix: error: {coverage_message(missing)}", err=True)
    say_completeness(completeness, resumable=record is not None and record.shards is None,
                     out_dir=path.parent)
    if completeness.state is Completion.INCOMPLETE:
        # Before the coverage verdict: branches a partial set never reached prove nothing.
        sys.exit(int(Exit.HARNESS))
    if require_coverage and missing:
        sys.exit(int(Exit.VIOLATIONS))


def say_completeness(completeness: Completeness, resumable: bool = False,
                     out_dir: Path | None = None) -> None:
    """On stderr: INCOMPLETE (with how to continue, for a run of one machine) or unknown."""
    line = completeness.line
    if line is None:
        return
    if completeness.state is Completion.UNKNOWN:
        click.echo(f"crashmatrix: note: {line}", err=True)
        return
    hint = (f"; continue it with `crashmatrix run --resume --out {out_dir}` and the same options"
            if resumable and out_dir is not None else "")
    click.echo(f"crashmatrix: error: {line}{hint}", err=True)
