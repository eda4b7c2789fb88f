"""Running a crash matrix from Python: a user's own test asks for it and asserts on the results.

    from crashmatrix.harness.api import run_matrix

    results = run_matrix(agent="langgraph:mypkg.graph:build", scenario_dirs=["scenarios"],
                         scenarios=["refund"])
    assert all(r.ok for r in results), [r.case for r in results if not r.ok]

The same matrix as `crashmatrix run` with the same arguments (agent, scenarios, faults, depth,
cases), its results as `CaseResult` objects in the order of their case ids, nothing written to
disk. The pytest plugin offers it as the `crashmatrix_run` fixture, with the project's ini values
(crashmatrix_agent, crashmatrix_scenarios, ...) as defaults. Bad input raises `MatrixError`
naming what was wrong. It runs in the caller's process, so its agents are not moved into a network
namespace of their own as the `crashmatrix` command's are (README, "What is confined").
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from contextlib import redirect_stderr

from crashmatrix.harness.records.results import DEFAULT_AGENT, DEFAULT_TIMEOUT_S, CaseResult


class MatrixError(Exception):
    """A matrix that cannot be run as asked: an unknown agent, scenario, fault or case."""


def run_matrix(agent: str = DEFAULT_AGENT, *, scenarios: Sequence[str] = (),
               scenario_dirs: Sequence[str] = (), faults: Sequence[str] = (), depth: int = 1,
               jobs: int = 2, timeout: float = DEFAULT_TIMEOUT_S,
               cases: Sequence[str] = ()) -> list[CaseResult]:
    """Every case's result (or only `cases`' and their scenarios' recordings), sorted by case id."""
    from crashmatrix.harness.execution.warm_zygotes import kept  # noqa: PLC0415

    # kept(): as in a command, a framework app's describe is forked from the zygote the run takes.
    with kept():
        found = _matrix(agent, scenarios, scenario_dirs, faults, depth, jobs, timeout, cases)
    unknown = sorted(set(cases) - {r.case for r in found})
    if unknown:  # as `run --case` refuses it: a slice that silently ran nothing proves nothing
        raise MatrixError(f"case {unknown[0]!r} is not in the matrix (`crashmatrix list --cases` lists it)")
    return sorted(found, key=lambda r: r.case)


def _matrix(agent: str, scenarios: Sequence[str], scenario_dirs: Sequence[str], faults: Sequence[str],
            depth: int, jobs: int, timeout: float, cases: Sequence[str]) -> list[CaseResult]:
    """`run_matrix`'s work: the CLI's checks, then the matrix; its results in the order they finished."""
    from crashmatrix.harness.cli import common_options as cli  # noqa: PLC0415
    from crashmatrix.harness.cli import matrix_setup as setup  # noqa: PLC0415 - the CLI imports this module's callers
    from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig  # noqa: PLC0415
    from crashmatrix.harness.records.case import Case  # noqa: PLC0415

    # The CLI's own checks, which end a command with exit 2 and a message: here, an exception.
    said = io.StringIO()  # what the CLI's checks print before they exit: the error's message
    try:
        with redirect_stderr(said):
            adapter = setup.adapter_named(agent)
            chosen = setup.scenarios_named(tuple(scenarios), tuple(scenario_dirs))
            if cases:
                wanted = {Case.parse(c).scenario for c in cases}
                chosen = [s for s in chosen if s.name in wanted]
            chosen = setup.fitting(adapter, chosen, named=bool(scenarios))
            selected = cli.selected_faults(adapter, tuple(faults))
    except SystemExit:
        raise MatrixError(said.getvalue().strip().removeprefix("crashmatrix: error: ")) from None
    except ValueError as exc:
        raise MatrixError(str(exc)) from None
    found: list[CaseResult] = []
    fsync = setup.fsync_default(None, selected, False)
    with setup.runner_config(agent, timeout, fsync, False, resolved=adapter) as config:
        matrix = Matrix(MatrixConfig(scenarios=chosen, runner=config, depth=depth, jobs=jobs,
                                     scenario_dirs=list(scenario_dirs), faults=selected,
                                     only=frozenset(cases) or None))
        matrix.run(lambda result, known: found.append(result))
    return found
