"""The downstream mutants (issue 31, item 6): each is killed on a scenario with a service, naming its
class, while our agent holds on the same cases; no scenario without a service can kill one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.cli.matrix_setup import runner_config
from crashmatrix.harness.execution.hunt import hunt
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.scenarios import Scenario, load_builtin

pytestmark = pytest.mark.crash
N = MutantName
BUILTINS = load_builtin()
REFERENCE = "durable-agent"
DOWNSTREAM = (N.FRESH_KEY, N.ATTEMPT_KEY, N.RESEND_WITHOUT_STATUS)
# The invariant that names each mutant's failure class.
CLASS = {N.FRESH_KEY: "downstream-key", N.ATTEMPT_KEY: "downstream-key",
         N.RESEND_WITHOUT_STATUS: "status-before-resend"}
# A reply lost after the service applied the send (the agent's own retry, in process), and a
# kill there (the recovery's re-send, in a new incarnation).
KEYED = ["email-keyed/d01:create:mail/reply-lost", "email-keyed/d01:create:mail/kill-after-apply"]
BY_REF = ["email-by-reference/d01:create:mail/reply-lost",
          "email-by-reference/d01:create:mail/kill-after-apply"]
KILLS = [(N.FRESH_KEY, c) for c in KEYED] + [(N.ATTEMPT_KEY, c) for c in KEYED] + [
    (N.RESEND_WITHOUT_STATUS, c) for c in BY_REF]


@contextlib.contextmanager
def matrix(agent: str, scenarios: list[Scenario], work: Path) -> Iterator[Matrix]:
    """A matrix over `scenarios` for `agent` (as `--agent` names it), with the fake downstream."""
    with runner_config(agent, 30.0, False, False, "fork", work=work) as runner:
        yield Matrix(MatrixConfig(scenarios=scenarios, runner=runner, jobs=2))


def run_case(agent: str, case_id: str, work: Path) -> CaseResult:
    case = Case.parse(case_id)
    with matrix(agent, [BUILTINS[case.scenario]], work) as m:
        return m.run_case(case)


def _killed(result: CaseResult, name: MutantName) -> None:
    assert result.verdict is Verdict.FAIL, (result.verdict, result.note)
    assert CLASS[name] in result.invariants, result.invariants
    assert "at-most-once" in result.invariants, result.invariants  # the service applied it twice
    assert result.repro == f"crashmatrix repro {result.case} --agent mutant:{name.value}"


def test_the_catalogue_lists_services_scenarios_only_for_them() -> None:
    for name in DOWNSTREAM:
        m = CATALOGUE[name]
        assert m.faults is None, "the default fault set has the downstream faults"
        assert all(BUILTINS[s].services for s in m.scenarios), m.scenarios
    # Killed only with a downstream in play: a scenario without a service never calls post_json.
    for scenario in BUILTINS.values():
        assert scenario.services or "post_json" not in scenario.tools.enabled, scenario.name


@pytest.mark.parametrize(("name", "case_id"), KILLS, ids=[f"{n.value}:{c}" for n, c in KILLS])
def test_the_mutant_is_killed_where_our_agent_holds(tmp_path: Path, name: MutantName,
                                                    case_id: str) -> None:
    _killed(run_case(f"mutant:{name.value}", case_id, tmp_path / "mutant"), name)
    ours = run_case(REFERENCE, case_id, tmp_path / "ours")
    assert ours.verdict is Verdict.PASS, (ours.verdict, ours.violations, ours.note)


@pytest.mark.parametrize("name", DOWNSTREAM, ids=[n.value for n in DOWNSTREAM])
def test_without_a_fault_the_mutant_holds(tmp_path: Path, name: MutantName) -> None:
    # One send, answered: nothing is re-sent, so neither the key nor the status query matters.
    for scenario in CATALOGUE[name].scenarios:
        result = run_case(f"mutant:{name.value}", f"{scenario}/none", tmp_path / scenario)
        assert result.verdict is Verdict.PASS, (result.verdict, result.violations, result.note)


@pytest.mark.parametrize("name", DOWNSTREAM, ids=[n.value for n in DOWNSTREAM])
def test_the_hunt_kills_it_on_its_own_scenarios(tmp_path: Path, name: MutantName) -> None:
    scenarios = [BUILTINS[s] for s in CATALOGUE[name].scenarios]
    with matrix(f"mutant:{name.value}", scenarios, tmp_path / "hunt") as m:
        found = hunt(name, scenarios, m.config.runner, jobs=2)
    assert found.killed, found
    assert found.case is not None
    assert found.case.split("/")[0] == CATALOGUE[name].scenarios[0]
    assert found.unjudged == 0, found
    assert found.repro == f"crashmatrix repro {found.case} --agent mutant:{name.value}"
    # The killing case, run again: the same verdict, its class among the invariants it violated,
    # and our agent holds on it.
    again = run_case(f"mutant:{name.value}", found.case, tmp_path / "again")
    _killed(again, name)
    assert found.invariant in again.invariants
    ours = run_case(REFERENCE, found.case, tmp_path / "ours")
    assert ours.verdict is Verdict.PASS, (ours.verdict, ours.violations, ours.note)
