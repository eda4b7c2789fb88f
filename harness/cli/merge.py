"""`crashmatrix merge`: the shards of one matrix combined into one results.jsonl and run.json, and
judged whole (a missing or incomplete shard, a matrix that crashed nothing, known failures)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import click

from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.out_claim import DEFAULT_OUT, claim_out
from crashmatrix.harness.cli.out_lock import lock_out
from crashmatrix.harness.cli.report import load_results, say_completeness
from crashmatrix.harness.cli.run import _shown
from crashmatrix.harness.cli.verdict_exit import baseline_of, refuse_uncrashed, verdict_against
from crashmatrix.harness.enumeration import parse_shard
from crashmatrix.harness.records.results import (
    RESULTS_FILE,
    CaseResult,
    ResultsError,
    merge,
    resolve_results_path,
    summary,
    write_results,
)
from crashmatrix.harness.records.run_record import (
    RUN_FILE,
    Completion,
    RunRecord,
    Shards,
    judge,
    read_run,
    run_file_for,
    write_run,
)
from crashmatrix.harness.records.terminal_text import terminal_safe
from crashmatrix.harness.verify import CHECKS
from crashmatrix.reports.facts import run_facts
from crashmatrix.reports.terminal import render as render_summary


@dataclass(frozen=True)
class _Input:
    """One input of `merge`: its results file and results, and the run.json beside it (if any)."""

    path: Path
    results: list[CaseResult]
    record: RunRecord | None
    split: tuple[int, int]  # (K, N) by its run.json; the whole matrix is 1/1

    @property
    def shard(self) -> str:
        k, n = self.split
        return "the whole matrix" if n == 1 else f"shard {k}/{n}"


def _merge_inputs(inputs: tuple[str, ...]) -> list[_Input]:
    """Read every input; refused (exit 2) when one is given twice or is damaged."""
    seen: dict[Path, Path] = {}
    described: dict[Path, Path] = {}
    out: list[_Input] = []
    for given in inputs:
        path = resolve_results_path(Path(given))
        twin = seen.get(path.resolve())
        if twin is not None:
            fail(f"{path} is given twice; give each shard once" if twin == path else
                 f"{twin} and {path} are the same results file; give each shard once")
        seen[path.resolve()] = path
        run_file = run_file_for(path)
        try:
            results = load_results(path)
            record = read_run(run_file)
        except ResultsError as exc:
            fail(str(exc))
        split = (1, 1)
        if record is not None:
            if run_file.resolve() in described:
                fail(f"{described[run_file.resolve()]} and {path} share one run.json ({run_file}), which "
                     "cannot describe both; keep each shard's results in a directory of its own")
            described[run_file.resolve()] = path
            try:
                split = parse_shard(record.options.shard) if record.options.shard else (1, 1)
            except ValueError:
                fail(f"{run_file}: shard must be K/N, e.g. 1/3 (found {record.options.shard!r})")
        out.append(_Input(path, results, record, split))
    return out


def _check_one_matrix(inputs: list[_Input]) -> None:
    """Refuse (exit 2) inputs that are not distinct shards of one matrix, by their run.json."""
    for i in inputs:
        if i.record is None:
            click.echo(f"crashmatrix: note: no run.json beside {i.path}: its agent, options, shard and "
                       "completeness cannot be checked", err=True)
    described = [i for i in inputs if i.record is not None]
    if not described:
        return
    first = described[0]
    assert first.record is not None
    by_split: dict[tuple[int, int], _Input] = {first.split: first}
    for other in described[1:]:
        assert other.record is not None
        differ = first.record.options.differences(other.record.options, ignore=("shard",))
        if differ:
            fail(f"{first.path} and {other.path} are not shards of one matrix: "
                 + "; ".join(f"{name} is {_shown(a)} in {first.path} and {_shown(b)} in {other.path}"
                             for name, a, b in differ))
        if other.split[1] != first.split[1]:
            fail(f"{first.path} and {other.path} are not shards of one split: {first.shard} and "
                 f"{other.shard}")
        twin = by_split.get(other.split)
        if twin is not None:
            fail(f"{twin.path} and {other.path} are the same shard ({other.shard}, by their run.json); "
                 "give each shard once")
        by_split[other.split] = other


def _merged_record(inputs: list[_Input], merged: list[CaseResult]) -> RunRecord | None:
    """run.json of the merged results: complete only when all N shards are there and complete."""
    described = [(i, i.record) for i in inputs if i.record is not None]
    if not described:
        return None
    verdicts = {i.split[0]: judge(record, i.results) for i, record in described}
    incomplete = tuple(k for k, c in sorted(verdicts.items()) if c.state is Completion.INCOMPLETE)
    unknown = sum(1 for c in verdicts.values() if c.state is Completion.UNKNOWN)
    shards = Shards(of=described[0][0].split[1], present=tuple(sorted(verdicts)), incomplete=incomplete,
                    unchecked=len(inputs) - len(described) + unknown)
    complete = False if shards.missing or shards.incomplete else (None if shards.unchecked else True)
    expected: Counter[str] | None = None
    if complete:
        expected = Counter()
        for _, record in described:
            expected.update(record.expected or {})
    first = described[0][1]
    return RunRecord(declared_branches=first.declared_branches, options=replace(first.options, shard=None),
                     expected=None if expected is None else dict(expected),
                     known=sum(max(record.known or 0, len(i.results)) for i, record in described),
                     done=len(merged), complete=complete, shards=shards,
                     network_exposed=next((r.network_exposed for _, r in described if r.network_exposed),
                                          None),
                     agent_origin=first.agent_origin, agent_framework=first.agent_framework)


@click.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path())
@click.option("--out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.option("--overwrite", is_flag=True,
              help="Replace result files in OUT even when no crashmatrix run wrote them there.")
@click.option("--baseline", "baseline_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Known failures, as on `run`: the merged matrix fails only on new failures and "
                   "on listed cases that now hold.")
def merge_(inputs: tuple[str, ...], out: str, as_json: bool, overwrite: bool,
           baseline_file: str | None) -> None:
    """Combine the results of the shards of one matrix into one results.jsonl and run.json."""
    known = baseline_of(baseline_file)
    out_dir = Path(out)
    claim_out(out_dir, overwrite)
    shards = _merge_inputs(inputs)
    _check_one_matrix(shards)
    try:
        merged = merge((i.results for i in shards), names=[str(i.path) for i in shards])
    except ResultsError as exc:
        fail(str(exc))
    agents = sorted({r.agent for r in merged})
    if len(agents) > 1:
        fail(f"the shards tested different agents ({', '.join(agents)}); merge results of one agent")
    record = _merged_record(shards, merged)
    # Everything is checked and read before anything is written: an input may be --out itself.
    lock_out(out_dir)
    write_results(out_dir / RESULTS_FILE, merged)
    if record is not None:
        write_run(out_dir / RUN_FILE, record)
    else:
        # A description left by an earlier run would misdescribe these results (claimed ours above).
        (out_dir / RUN_FILE).unlink(missing_ok=True)
    completeness = judge(record, merged)
    if record is not None and record.shards is not None and record.shards.of > 1:
        s = record.shards
        tail = (f"; {s.unchecked} input(s) say nothing of their shard, so which are missing "
                "cannot be told" if s.unchecked
                else f"; missing: {', '.join(f'{k}/{s.of}' for k in s.missing)}" if s.missing else "")
        what = "described by a run.json" if s.unchecked else "present"
        click.echo(f"crashmatrix: {len(s.present)} of {s.of} shards {what}{tail}", err=True)
    for i in shards:
        c = judge(i.record, i.results) if i.record is not None else None
        if c is not None and c.state is Completion.INCOMPLETE:
            click.echo(f"crashmatrix: {i.shard} ({i.path}) is incomplete: {c.line}", err=True)
    # What the shards proved together (no duration: each shard timed only itself).
    facts = run_facts(merged, list(CHECKS), list(record.declared_branches) if record else [],
                      record.options.depth if record else None,
                      [out_dir / RESULTS_FILE, *([out_dir / RUN_FILE] if record is not None else [])])
    if as_json:
        click.echo(json.dumps(summary(merged, str(out_dir)) | facts.to_json(), ensure_ascii=False))
        say_completeness(completeness)
    else:
        click.echo(terminal_safe(render_summary(merged, str(out_dir / RESULTS_FILE), completeness, facts)))
    if completeness.state is Completion.INCOMPLETE:
        sys.exit(int(Exit.HARNESS))
    refuse_uncrashed(merged)
    sys.exit(int(verdict_against(merged, known, baseline_file)))
