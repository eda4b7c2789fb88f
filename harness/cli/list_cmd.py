"""`crashmatrix list`: scenarios, their case ids (from a recording), the agents and their tools."""

from __future__ import annotations

import click
from tabulate import tabulate

from crashmatrix.harness.adapters.registry import list_agents
from crashmatrix.harness.cli.common_options import selected_faults, with_common
from crashmatrix.harness.cli.matrix_setup import (
    adapter_named,
    fsync_default,
    require_fit,
    runner_config,
    scenarios_named,
)
from crashmatrix.harness.cli.tools_table import tools_table
from crashmatrix.harness.cli.traced_modes import black_box_usable, syscalls_usable
from crashmatrix.harness.enumeration import blackbox_cases, single_crash_cases
from crashmatrix.harness.execution.runner import CaseRunner, RunnerConfig
from crashmatrix.harness.faults.interface import has_variants_of
from crashmatrix.harness.faults.registry import faults_for
from crashmatrix.harness.records.case import Case
from crashmatrix.scenarios.model import Scenario


@click.command("list")
@with_common
@click.option("--cases", is_flag=True, help="Record each scenario and list its single-crash case ids.")
@click.option("--agents", is_flag=True, help="List the registered agents: name, origin, capabilities.")
@click.option("--tools", "tools", is_flag=True,
              help="List the tools the --agent declares (with --agents: every registered agent's): "
                   "name, replay policy, arguments. A framework app is loaded to find them.")
@click.option("--syscalls", is_flag=True,
              help="With --cases: list the system-call points' cases too (as `run --syscalls`).")
def list_(names: tuple[str, ...], dirs: tuple[str, ...], agent: str, timeout: float, max_events: int,
          fsync_given: str | None, fault_names: tuple[str, ...], spawn: str, cases: bool,
          agents: bool, tools: bool, black_box: bool, syscalls: bool) -> None:
    """List scenarios (with --cases, their case ids; with --agents, the agents; with --tools, tools)."""
    if tools:
        chosen = [(a.name, a.name) for a in list_agents()] if agents else []
        if not agents or ":" in agent:
            chosen.append((agent, agent))
        for shown, ref in chosen:
            click.echo(tools_table(shown, adapter_named(ref)))
        return
    if agents:
        rows = [(a.name, a.origin, a.value, ", ".join(a.capabilities)) for a in list_agents()]
        if ":" in agent:  # an agent named by path is listed too, so it can be checked
            path = adapter_named(agent)
            rows.append((path.name, "path", agent, ", ".join(sorted(c.value for c in path.capabilities))))
        click.echo(tabulate(rows, headers=["agent", "origin", "from", "capabilities"]))
        return
    scenarios = scenarios_named(names, dirs)
    if not cases:
        for s in scenarios:
            click.echo(f"{s.name:18} {s.description}")
        return
    adapter = adapter_named(agent)
    require_fit(adapter, scenarios)
    selected = selected_faults(adapter, fault_names)
    if black_box:
        black_box_usable(adapter, selected, 1)
    if syscalls:
        syscalls_usable(adapter, selected)
    with runner_config(agent, timeout, fsync_default(fsync_given, selected, black_box), False, spawn,
                       resolved=adapter, max_events=max_events, blackbox=black_box,
                       syscalls=syscalls) as cfg:
        for s in scenarios:
            for case in enumerate_cases(cfg, s, selected, syscalls):
                click.echo(case.case_id)
    if any(has_variants_of(f) for f in faults_for(adapter, selected)):
        # A variant is read from its parent's run: no recording lists it.
        click.echo("crashmatrix: note: each case of a fault with variants (power-subsets) runs its "
                   "variants too, as sibling cases (`.../power-subsets:MASK`) found when it runs; "
                   "they are not listed here", err=True)


def enumerate_cases(cfg: RunnerConfig, scenario: Scenario, selected: tuple[str, ...] | None = None,
               syscalls: bool = False) -> list[Case]:
    """The scenario's single-crash cases, from a recording (`syscalls`: traced for its
    system-call points too)."""
    obs = CaseRunner(cfg).run(Case(scenario.name), scenario, trace_finisher=syscalls and not cfg.blackbox)
    faults = faults_for(cfg.adapter, selected)
    if cfg.blackbox:
        calls = obs.incarnations[0].store_calls if obs.incarnations else []
        return [Case(scenario.name), *blackbox_cases(scenario.name, calls, faults)]
    first = [e.point for e in obs.incarnations[0].events] if obs.incarnations else []
    calls = obs.incarnations[0].store_calls if obs.incarnations and syscalls else []
    settle = obs.incarnations[1].store_calls if len(obs.incarnations) > 1 and syscalls else []
    return [Case(scenario.name), *single_crash_cases(scenario.name, first, faults, obs.requests_of(1),
                                                     calls, settle)]
