"""Every downstream fault kind has a mutant that only it kills: on the mutant's scenarios, the
single-crash matrix (the default fault set: the probe-event faults and the five downstream ones)
fails cases of that fault kind, and of no other, and our agent holds on those same cases."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.cli.matrix_setup import runner_config
from crashmatrix.harness.execution.hunt import hunt_all
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.scenarios import Scenario, load_builtin

pytestmark = pytest.mark.crash
N = MutantName
BUILTINS = load_builtin()
REFERENCE = "durable-agent"
PROBE_FAULTS = {"kill", "second", "torn"}
DOWNSTREAM_FAULTS = {"reply-lost", "kill-after-apply", "error-after-apply", "error-before-apply",
                     "timeout"}
# Each mutant, the one fault kind that kills it, and the invariants its killing cases violate.
KILLER = {
    N.NO_CLIENT_TIMEOUT: ("timeout", {"liveness"}),  # held until the case's deadline
    N.ERROR_MEANS_REFUSED: ("error-after-apply", {"scenario-oracle"}),  # asked again: 2 emails
    N.ERROR_MEANS_SUCCESS: ("error-before-apply", {"scenario-oracle"}),  # never retried: none
    N.RESET_MEANS_UNSENT: ("reply-lost", {"scenario-oracle"}),  # asked again: 2 emails
    N.JOURNAL_AFTER_REPLY: ("kill-after-apply", {"at-most-once"}),  # re-sent anew by recovery
}
# The case deadline: short, since a hung agent (no-client-timeout) runs into it; long enough for a
# case whose reply the service holds (our agent gives up after DOWNSTREAM_TIMEOUT_S, 2 s).
TIMEOUT_S = 5.0


@contextlib.contextmanager
def matrix(agent: str, scenarios: list[Scenario], work: Path) -> Iterator[Matrix]:
    with runner_config(agent, TIMEOUT_S, False, False, "fork", work=work) as runner:
        yield Matrix(MatrixConfig(scenarios=scenarios, runner=runner, jobs=2))


def fault_of(result: CaseResult) -> str | None:
    """The fault of the case's last step (None: a recording)."""
    schedule = Case.parse(result.case).schedule
    return schedule[-1].fault if schedule else None


@pytest.mark.parametrize("name", list(KILLER), ids=[n.value for n in KILLER])
def test_only_its_own_fault_kind_kills_the_mutant(tmp_path: Path, name: MutantName) -> None:
    fault, invariants = KILLER[name]
    mutant = CATALOGUE[name]
    assert mutant.faults is None, "the default fault set has the downstream faults"
    scenarios = [BUILTINS[s] for s in mutant.scenarios]
    results: list[CaseResult] = []
    with matrix(f"mutant:{name.value}", scenarios, tmp_path / "mutant") as m:
        m.run(lambda result, _known: results.append(result))
    assert results
    assert all(r.depth <= 1 for r in results)
    assert all(r.verdict in (Verdict.PASS, Verdict.FAIL) for r in results), \
        [(r.case, r.verdict, r.note) for r in results if r.verdict not in (Verdict.PASS, Verdict.FAIL)]
    # Every other fault kind had its chance on these scenarios.
    ran = {fault_of(r) for r in results}
    assert ran >= PROBE_FAULTS | DOWNSTREAM_FAULTS, ran
    failed = [r for r in results if r.verdict is Verdict.FAIL]
    # (a) killed by its own fault kind, with the invariant of its failure class.
    assert failed, f"{name.value} survived"
    for r in failed:
        assert invariants <= set(r.invariants), (r.case, r.invariants)
        assert r.repro is not None
        assert r.repro.startswith(f"crashmatrix repro {r.case} --agent mutant:{name.value}"), r.repro
    # (b) by no other: every failing case is one crash, of its fault kind.
    assert [(r.case, fault_of(r)) for r in failed if fault_of(r) != fault or r.depth != 1] == []
    assert {r.scenario for r in failed} == set(mutant.scenarios), "each of its scenarios kills it"
    # (c) our agent holds on the killing cases.
    with matrix(REFERENCE, scenarios, tmp_path / "ours") as m:
        ours = [m.run_case(Case.parse(r.case)) for r in failed]
    assert [(r.case, r.verdict, r.invariants) for r in ours if r.verdict is not Verdict.PASS] == []


def test_the_hunt_kills_each_by_its_fault_on_its_first_scenario(tmp_path: Path) -> None:
    # As `crashmatrix mutants --mutant NAME --timeout 5` does.
    hunts = hunt_all(list(KILLER), jobs=2, timeout_s=TIMEOUT_S, work=tmp_path)
    assert [h.mutant for h in hunts] == list(KILLER)
    for h in hunts:
        fault, invariants = KILLER[h.mutant]
        assert h.killed, h
        assert h.focused, h
        assert h.unjudged == 0, h
        assert h.invariant in invariants, h
        assert h.case is not None
        assert h.case.startswith(f"{CATALOGUE[h.mutant].scenarios[0]}/d01:create:"), h
        assert h.case.endswith(f"/{fault}"), h
