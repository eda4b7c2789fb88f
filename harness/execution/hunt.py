"""Hunts mutants: a focused crash matrix per mutant, level by level, until a case kills it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.fakes import FakeDownstream, FakeProvider
from crashmatrix.harness.adapters.mutant import MutantAdapter
from crashmatrix.harness.enumeration import (
    calls_of,
    crash_loop_extension,
    requests_of,
    single_crash_cases,
    syscall_steps,
    variant_siblings,
)
from crashmatrix.harness.execution.incarnation import kill_all
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.execution.ordered import first_failure, run_until_failure
from crashmatrix.harness.execution.runner import RunnerConfig
from crashmatrix.harness.execution.scratch import scratch_dir
from crashmatrix.harness.execution.spawn import SpawnMode
from crashmatrix.harness.execution.spawners import make_spawner
from crashmatrix.harness.faults.interface import FaultKind
from crashmatrix.harness.faults.registry import FAULTS, observing
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.scenarios import Scenario, load_builtin, resolve

JUDGED = (Verdict.PASS, Verdict.FAIL)  # verdicts whose trace can be extended


@dataclass(frozen=True)
class Hunt:
    """How one mutant fared: the first case (in enumeration order) that killed it, if any."""

    mutant: MutantName
    killed: bool
    case: str | None = None
    invariant: str | None = None  # the first violation's invariant, in the verifier's order
    cases: int = 0  # cases run
    focused: bool = True  # killed within the catalogue's scenarios (else by the fallback)
    unjudged: int = 0  # cases that ended nondeterministic or in a harness error
    repro: str | None = None  # the command that re-runs the killing case against this mutant

    def to_json(self) -> dict[str, Any]:
        return {"mutant": self.mutant.value, "killed": self.killed, "case": self.case,
                "invariant": self.invariant, "repro": self.repro}


def next_level(cases: Sequence[Case], results: Sequence[CaseResult | None],
               by_name: Mapping[str, Scenario], faults: Sequence[FaultKind],
               syscalls: bool = False) -> list[Case]:
    """Recordings give single crashes; a crash gives its crash-loop schedule (`[matrix]
    crash_loop`) and the other states of its crash point (its fault's variants), as `crashmatrix
    run` enumerates them at its default depth; with `syscalls`, a single crash also gives the
    system-call points of its recovery (`run --syscalls --depth 2`)."""
    out: list[Case] = []
    for case, result in zip(cases, results, strict=True):
        if result is None or result.verdict not in JUDGED or not result.trace:
            continue
        if case.depth == 0:
            out += single_crash_cases(case.scenario, result.trace[0], faults, requests_of(result, 0),
                                      calls_of(result, 0), calls_of(result, 1))
            continue
        out += variant_siblings(case, result.variants)
        if syscalls and case.depth == 1 and not case.crashes_settle:
            out += [case.extend(step) for step in (syscall_steps(calls_of(result, 1), faults)
                                                   + syscall_steps(calls_of(result, 2), faults, settle=True))]
        loop = crash_loop_extension(case, result.trace, by_name[case.scenario].matrix.crash_loop,
                                    result.downstream)
        if loop is not None:
            out.append(loop)
    return out


def hunt(mutant: MutantName, scenarios: Sequence[Scenario], runner: RunnerConfig,
         jobs: int, faults: tuple[str, ...] | None = None, states: bool = False,
         syscall_depth: int = 1) -> Hunt:
    """Run the mutant's matrix over `scenarios`: all recordings, then all single crashes, then
    crash loops; each level in scenario order, then crash-point order; stop at the first kill.
    `faults`: the kinds enumerated (None: the default set); `states`: as `run --states`;
    `syscall_depth` (with `runner.syscalls`): 2, the recoveries' system-call points too."""
    # At system-call depth 2, single crashes trace their recoveries (the matrix's depth 2).
    deep = runner.syscalls and syscall_depth > 1
    matrix = Matrix(MatrixConfig(scenarios=list(scenarios), runner=runner, jobs=jobs, faults=faults,
                                 states=states, depth=2 if deep else 1))
    by_name = {s.name: s for s in scenarios}

    def abort() -> None:
        matrix.stop.set()
        kill_all()

    try:
        return _levels(mutant, matrix, by_name, jobs, abort)
    finally:
        if matrix.states is not None:  # its snapshots and shared recoveries go with the hunt
            for name in by_name:
                matrix.states.forget(name)


def _levels(mutant: MutantName, matrix: Matrix, by_name: Mapping[str, Scenario], jobs: int,
            abort: Callable[[], None]) -> Hunt:
    cases: list[Case] = [Case(name) for name in by_name]
    run = unjudged = 0
    while cases:
        results = run_until_failure(matrix.run_case, cases, jobs, abort)
        done = [r for r in results if r is not None]
        run += len(done)
        unjudged += sum(1 for r in done if r.verdict not in JUDGED)
        killer = first_failure(results)
        if killer is not None:
            return Hunt(mutant, True, killer.case, str(killer.violations[0]["invariant"]), run,
                        unjudged=unjudged, repro=killer.repro)
        cases = next_level(cases, results, by_name, matrix.faults, matrix.config.depth > 1)
        if matrix.states is not None:
            matrix.states.expect(cases)
    return Hunt(mutant, False, cases=run, unjudged=unjudged)


def hunt_all(names: Sequence[MutantName], *, jobs: int = 2, spawn: SpawnMode = SpawnMode.FORK,
             timeout_s: float = 30.0, work: Path | None = None,
             on_hunt: Callable[[Hunt], None] | None = None, states: bool = False) -> list[Hunt]:
    """Hunt each mutant in turn (cases of one mutant run in parallel), sharing one fake provider
    and one zygote: the zygote holds no patch, each forked child applies its own. Cases run
    under `work` (default: a temporary directory) and are deleted as they finish."""
    builtins = load_builtin()
    # The zygote starts before the fake provider's threads exist, so it forks clean children.
    spawner = make_spawner(spawn, list(MutantAdapter.python.preload) if MutantAdapter.python else None)
    out: list[Hunt] = []
    try:
        with FakeProvider() as provider, FakeDownstream() as downstream, \
                scratch_dir(prefix="crashmatrix-mutants-") as tmp:
            for name in names:
                faults = CATALOGUE[name].faults
                # A power loss is judged on an agent told to sync (as `run --fault power` does).
                power = faults is not None and observing(f for f in FAULTS.all() if f.name in faults)
                runner = RunnerConfig(adapter=MutantAdapter(name), provider=provider,
                                      downstream=downstream,
                                      work_root=(work or Path(tmp)) / name.value,
                                      case_timeout_s=timeout_s, spawner=spawner, fsync=power,
                                      syscalls=CATALOGUE[name].syscalls > 0)
                # A catalogue entry may name an arrival-timing variant of a built-in.
                focused = resolve(CATALOGUE[name].scenarios)
                found = hunt(name, focused, runner, jobs, faults, states, CATALOGUE[name].syscalls)
                if not found.killed:
                    # The catalogue's guess missed: every other built-in gets its chance.
                    rest = [s for n, s in sorted(builtins.items()) if n not in CATALOGUE[name].scenarios]
                    more = hunt(name, rest, runner, jobs, faults, states, CATALOGUE[name].syscalls)
                    found = Hunt(name, more.killed, more.case, more.invariant,
                                 found.cases + more.cases, focused=False,
                                 unjudged=found.unjudged + more.unjudged, repro=more.repro)
                out.append(found)
                if on_hunt is not None:
                    on_hunt(found)
    finally:
        spawner.close()
    return out
