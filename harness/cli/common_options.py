"""Options `run`, `list` and `repro` share (scenarios, agent, deadlines, faults); the checked fault choice."""

from __future__ import annotations

from typing import Any

import click

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.adapters.registry import DEFAULT_AGENT
from crashmatrix.harness.cli.exitcodes import fail
from crashmatrix.harness.cli.matrix_setup import need_tracer
from crashmatrix.harness.faults.registry import check_selection
from crashmatrix.harness.records.results import DEFAULT_MAX_EVENTS, DEFAULT_TIMEOUT_S

common_scenarios = [
    click.option("--scenario", "names", multiple=True, metavar="NAME",
                 help="Scenario to run (repeatable; default: every built-in and --scenarios one)."),
    click.option("--scenarios", "dirs", multiple=True, metavar="DIR",
                 type=click.Path(file_okay=False), help="Also load scenarios from DIR (repeatable)."),
    click.option("--agent", default=DEFAULT_AGENT, show_default=True,
                 help="Adapter of the agent under test: a registered name (crashmatrix.adapters "
                      "entry points: durable-agent, messages-only, ...) or mutant:NAME."),
    click.option("--timeout", default=DEFAULT_TIMEOUT_S, show_default=True, metavar="S",
                 help="Per-case deadline; an agent that exceeds it is a liveness violation."),
    click.option("--max-events", default=DEFAULT_MAX_EVENTS, show_default=True, metavar="N",
                 type=click.IntRange(1), help="Step bound: an incarnation that emits more probe "
                 "events is killed at once (a runaway loop, of the agent or the script)."),
    click.option("--fsync", "fsync_given", type=click.Choice(["on", "off"]), default=None,
                 help="The agent's fsync setting; default off (faster: SIGKILL loses no written "
                      "data), on when a power-loss fault is selected (--fault power)."),
    click.option("--fault", "fault_names", multiple=True, metavar="NAME",
                 help="Fault kind to enumerate (repeatable; default: kill, second, torn and, for "
                      "a scenario with downstream services, the downstream faults; the power "
                      "family (power, power-keep1, power-names, power-blocks, power-subsets) and "
                      "the I/O errors (eio-fsync, enospc-write, short-write) run only when named "
                      "here, each case under strace)."),
    click.option("--spawn", type=click.Choice(["fork", "fresh"]), default="fork", show_default=True,
                 help="fork: incarnations fork from a pre-imported zygote; fresh: a new interpreter each."),
    click.option("--black-box", "black_box", is_flag=True,
                 help="Crash at the agent's writes and syncs of its store (seen by strace), not at "
                      "probe events: the agent runs without probes. For any agent whose store is "
                      "files in its session directory ('file-store'); fault: kill; one crash deep. "
                      "(`repro` of a black-box case id needs no flag: `b03:` says so.)"),
]


def with_common(fn: Any) -> Any:
    for option in reversed(common_scenarios):
        fn = option(fn)
    return fn


def selected_faults(adapter: Adapter, names: tuple[str, ...]) -> tuple[str, ...] | None:
    """The `--fault` selection, checked (exit 2 naming an unknown fault, or one the agent cannot
    take; exit 3 when a selected fault needs strace and it is missing); None: the default set."""
    if not names:
        return None
    selected = tuple(dict.fromkeys(names))
    problems = check_selection(selected, adapter)
    if problems:
        fail("; ".join(problems))
    need_tracer(selected)
    return selected
