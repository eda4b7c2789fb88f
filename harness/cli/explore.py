"""`crashmatrix explore`: search generated scenarios and crash schedules for a failing case."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from pathlib import Path

import click
from hypothesis.strategies import SearchStrategy

from crashmatrix.fakes import FakeDownstream, FakeProvider
from crashmatrix.harness.adapters.interface import Adapter, Capability, PreflightError
from crashmatrix.harness.adapters.registry import DEFAULT_AGENT
from crashmatrix.harness.adapters.requirements import agent_label, misfit
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.cli.portable import found_from_here, portable_path, portable_paths, run_dir
from crashmatrix.harness.execution.runner import CaseRunner, RunnerConfig
from crashmatrix.harness.execution.scratch import scratch_dir
from crashmatrix.harness.execution.spawn import SpawnMode
from crashmatrix.harness.execution.spawners import make_spawner
from crashmatrix.harness.explore.agents import AgentChoiceError, label, resolve_adapter
from crashmatrix.harness.explore.build import build_scenario
from crashmatrix.harness.explore.plan import Action, ActionKind, Plan
from crashmatrix.harness.explore.report import summary_json, text_report
from crashmatrix.harness.explore.repro import repro_command, repro_data, write_repro
from crashmatrix.harness.explore.search import Example, SearchConfig, SearchResult, search
from crashmatrix.harness.explore.strategies import examples, given_examples
from crashmatrix.harness.explore.trial import CaseCache, Finding

DEFAULT_OUT = "crashmatrix-out"
DEFAULT_EXAMPLES = 100
CI_EXAMPLES = 25  # CI runs derandomized with a small budget; --examples for longer runs
CI_SEED = 0


class _Progress:
    """A one-line count on stderr, only when stderr is a terminal (CI logs stay clean)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.enabled = sys.stderr.isatty()
        self.shown = False

    def __call__(self, done: int) -> None:
        if self.enabled:
            click.echo(f"\rexplore: {done}/{self.total} examples ", err=True, nl=False)
            self.shown = True

    def close(self) -> None:
        if self.shown:
            click.echo("", err=True)


def search_config(examples: int | None, seed: int | None, jobs: int, shrink_seconds: float,
                  env: dict[str, str] | os._Environ[str]) -> SearchConfig:
    """The budget and seed: as given, else CI's derandomized small run, else a random seed
    (printed, so the run can be repeated with --seed)."""
    ci = bool(env.get("CI"))
    budget = examples if examples is not None else (CI_EXAMPLES if ci else DEFAULT_EXAMPLES)
    chosen = seed if seed is not None else (CI_SEED if ci else random.getrandbits(32))
    return SearchConfig(examples=budget, seed=chosen, jobs=jobs, ci=ci, shrink_seconds=shrink_seconds)


def repro_path(out: Path, finding: Finding) -> Path:
    digest = hashlib.sha1(finding.case.case_id.encode()).hexdigest()[:8]
    return out / f"explore-{finding.case.scenario}-{digest}.json"


# Every tool a generated plan may call, in one scenario: an agent that can run it can run any plan.
EVERY_TOOL = Plan(turns=((Action(ActionKind.READ, 0), Action(ActionKind.APPEND, 1)),
                         (Action(ActionKind.WRITE, 2), Action(ActionKind.BASH, 3))))


def _strategy(adapter: Adapter, names: tuple[str, ...],
              dirs: tuple[str, ...]) -> tuple[SearchStrategy[Example], str]:
    """What to explore, and a line that says so: the scenarios the user named (or those in their
    folders), as written, with drawn crash schedules; else plans generated for our tool
    vocabulary, if the agent has those tools; else the built-in scenarios it can run (exit 2,
    naming why, when it can run none)."""
    from crashmatrix.harness.cli import matrix_setup as setup  # noqa: PLC0415 - the scenario checks `run` makes

    torn = Capability.TEAR in adapter.capabilities
    if names or dirs:
        chosen = setup.fitting(adapter, setup.scenarios_named(names, dirs), named=bool(names))
        return given_examples(chosen, torn), f"crash schedules of {', '.join(s.name for s in chosen)}"
    try:
        unfit = misfit(adapter, build_scenario(EVERY_TOOL))
    except PreflightError as exc:
        fail(str(exc), Exit.USAGE)
    if not unfit:
        inbox = Capability.INBOX in adapter.capabilities
        return examples(inbox, torn), "generated scenarios and crash schedules"
    fitting = [s for s in setup.scenarios_named((), ()) if not misfit(adapter, s)]
    vocabulary = ", ".join(t.value for t in EVERY_TOOL.tools())
    if not fitting:
        fail(f"agent {agent_label(adapter)!r} cannot run the generated scenarios (their tools are "
             f"{vocabulary}) nor any built-in scenario: name scenarios written for its tools with "
             "--scenarios DIR (docs/scenarios.md), and explore draws crash schedules of those", Exit.USAGE)
    click.echo(f"crashmatrix: agent {agent_label(adapter)!r} cannot run the generated scenarios (their "
               f"tools are {vocabulary}): exploring crash schedules of the built-in scenarios it can "
               "run; name your own with --scenarios DIR", err=True)
    return given_examples(fitting, torn), f"crash schedules of {', '.join(s.name for s in fitting)}"


def _run(config: SearchConfig, agent: str, mutant: str | None, timeout: float,
         names: tuple[str, ...] = (), dirs: tuple[str, ...] = ()) -> tuple[SearchResult, str]:
    adapter = resolve_adapter(agent, mutant)
    # Generate only what the agent's adapter declares it supports (no silent misdelivery).
    strategy, what = _strategy(adapter, names, dirs)
    # The zygote starts first, before this process has any thread, so it forks clean children.
    spawner = make_spawner(SpawnMode.FORK, list(adapter.python.preload) if adapter.python else None)
    progress = _Progress(config.examples)
    try:
        with FakeProvider() as provider, FakeDownstream() as downstream, \
                scratch_dir(prefix="crashmatrix-explore-") as tmp:
            runner = CaseRunner(RunnerConfig(adapter=adapter, provider=provider, downstream=downstream,
                                             work_root=Path(tmp), case_timeout_s=timeout, spawner=spawner,
                                             agent_ref=agent if mutant is None else None))
            where = run_dir() if found_from_here(agent) else None
            printed = tuple(portable_paths(dirs, from_here=where is not None))
            cache = CaseCache(runner, adapter.name if mutant is not None else agent, printed, where)
            return search(cache, config, strategy, progress), what
    finally:
        progress.close()
        spawner.close()


@click.command("explore")
@click.option("--examples", type=click.IntRange(1), default=None, metavar="N",
              help=f"Examples to generate (default {DEFAULT_EXAMPLES}; {CI_EXAMPLES} when CI is set).")
@click.option("--seed", type=int, default=None, metavar="S",
              help="Seed of the search (default: random; 0 when CI is set, i.e. derandomized).")
@click.option("--agent", default=DEFAULT_AGENT, show_default=True, help="Adapter of the agent under test.")
@click.option("--mutant", default=None, metavar="NAME",
              help="Explore a mutant of the durable agent instead (see `crashmatrix mutants`).")
@click.option("--scenarios", "scenario_dirs", multiple=True, metavar="DIR",
              help="Explore crash schedules (1-3 crashes, recovery included) of the scenarios in DIR, "
                   "as written: your tools, your expected end state (repeatable).")
@click.option("--scenario", "scenario_names", multiple=True, metavar="NAME",
              help="Only these scenarios (repeatable; built-in or from --scenarios).")
@click.option("--jobs", "-j", default=1, show_default=True, type=click.IntRange(1, 2),
              help="Independent searches run side by side (seeds S, S+1), sharing the budget.")
@click.option("--out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False),
              help="Where the repro file of a failure is written.")
@click.option("--timeout", default=30.0, show_default=True, metavar="S",
              help="Per-case deadline; an agent that exceeds it is a liveness violation.")
@click.option("--shrink-time", default=300.0, show_default=True, metavar="S",
              help="Stop shrinking a failure after S seconds and report the smallest found so far.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON summary object on stdout.")
@click.pass_context
def explore(ctx: click.Context, examples: int | None, seed: int | None, agent: str, mutant: str | None,
            scenario_dirs: tuple[str, ...], scenario_names: tuple[str, ...],
            jobs: int, out: str, timeout: float, shrink_time: float, as_json: bool) -> None:
    """Generate scenarios and crash schedules (1-3 crashes, recovery included) with Hypothesis;
    shrink the first failure, write a repro file and print the command that replays it.

    With --scenarios/--scenario, or for an agent whose tools are not the generated scenarios'
    (read, append_note, write, bash), the scenarios are the user's (or the built-ins it can run),
    as written, and only the crash schedules are drawn.

    Exit codes: 0 nothing found, 1 a failure found, 2 usage error, 3 harness error.
    """
    if mutant is not None and ctx.get_parameter_source("agent") is not click.core.ParameterSource.DEFAULT:
        fail("--agent and --mutant are exclusive (a mutant is a variant of the durable agent)",
              Exit.USAGE)
    config = search_config(examples, seed, jobs, shrink_time, os.environ)
    chosen_seed = config.seed
    who = label(agent, mutant)
    try:
        result, what = _run(config, agent, mutant, timeout, scenario_names, scenario_dirs)
        who = f"{who}; {what}"
    except AgentChoiceError as exc:
        fail(str(exc), Exit.USAGE)
        return
    except KeyboardInterrupt as exc:  # SIGINT or SIGTERM (crashmatrix.harness.cli.main)
        fail(str(exc) or "interrupted by SIGINT", Exit.HARNESS)
        return
    except Exception as exc:  # the harness failed, not the agent: exit 3, not a traceback's 1
        fail(f"harness error: {exc.__class__.__name__}: {exc}", Exit.HARNESS)
        return
    if result.error is not None:
        fail(f"harness error: {result.error}", Exit.HARNESS)
    finding = result.finding
    file: Path | None = None
    if finding is not None:
        try:
            file = write_repro(repro_path(Path(out), finding),
                               repro_data(finding, agent, mutant, chosen_seed))
        except OSError as exc:
            fail(f"cannot write the repro file under {out}: {exc.strerror or exc}", Exit.HARNESS)
    # Relative to the repository root, like every printed repro line (harness/cli/portable.py).
    command = repro_command(portable_path(file)) if file is not None else None
    if as_json:
        click.echo(json.dumps(summary_json(result, agent, mutant, chosen_seed,
                                           str(file) if file else None, command) | {"explored": what},
                              ensure_ascii=False))
    else:
        for line in text_report(result, who, chosen_seed, file, command):
            click.echo(line)
    sys.exit(int(Exit.HELD if finding is None else Exit.VIOLATIONS))
