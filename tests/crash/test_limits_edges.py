"""Limits at their edges (issue 36, item 3): our agent holds on the edge built-ins, and each
off-by-one mutant is killed there, by the case at the edge it misses, where our agent holds."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.cli.matrix_setup import runner_config
from crashmatrix.harness.execution.hunt import hunt_all
from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.scenarios import load_builtin

pytestmark = pytest.mark.crash
N = MutantName
BUILTINS = load_builtin()
EDGES = ["max-steps-at", "max-steps-over", "max-retries-at", "resume-budget-edge"]
# Each mutant's killing case, the invariants it breaks there, and what its message says.
KILLED = {
    N.MAX_STEPS_ONE_LATE: ("max-steps-over/none", {"retry-bound", "scenario-oracle"}, "one late"),
    N.MAX_STEPS_ONE_EARLY: ("max-steps-at/none", {"retry-bound", "scenario-oracle"}, "one early"),
    N.RETRIES_ONE_EARLY: ("max-retries-at/none", {"retry-bound", "scenario-oracle"}, "one early"),
    N.RESUME_BUDGET_ONE_EARLY: (
        "resume-budget-edge/05:inbox.poll:inbox/kill+05:inbox.poll:inbox/kill", {"resume-budget"},
        "one early"),
}


@contextlib.contextmanager
def matrix(agent: str, work: Path) -> Iterator[Matrix]:
    with runner_config(agent, 30.0, False, False, "fork", work=work) as runner:
        yield Matrix(MatrixConfig(scenarios=list(BUILTINS.values()), runner=runner, jobs=1))


def run_case(agent: str, case_id: str, work: Path) -> CaseResult:
    with matrix(agent, work) as m:
        return m.run_case(Case.parse(case_id))


def test_our_agent_holds_on_every_edge_builtin(tmp_path: Path) -> None:
    args = [a for name in EDGES for a in ("--scenario", name)]
    proc = subprocess.run([sys.executable, "-m", "crashmatrix", "run", *args, "--json", "--jobs", "2",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["failed"] == 0
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    # The three crashes in a row of resume-budget-edge reach the budget close; two do not.
    closed = {r["case"].count("+") + 1 for r in rows if "close.budget_exhausted" in r["branches"]}
    assert closed == {3}


def test_each_limit_mutant_is_killed_at_its_edge_where_our_agent_holds(tmp_path: Path) -> None:
    hunts = hunt_all(list(KILLED), jobs=2, work=tmp_path / "hunt", timeout_s=10.0)
    for h in hunts:
        case, invariants, says = KILLED[h.mutant]
        assert (h.killed, h.focused, h.case, h.unjudged) == (True, True, case, 0), h
        result = run_case(f"mutant:{h.mutant.value}", case, tmp_path / h.mutant.value)
        assert result.verdict is Verdict.FAIL
        assert set(result.invariants) == invariants, result.violations
        assert any(v["message"].endswith(says) for v in result.violations), result.violations
        ours = run_case("durable-agent", case, tmp_path / f"ours-{h.mutant.value}")
        assert ours.verdict is Verdict.PASS, (ours.violations, ours.note)
        assert case.split("/")[0] in CATALOGUE[h.mutant].scenarios


@pytest.mark.parametrize(("name", "case_id"), [
    # The old built-ins never reach a step limit of 100 ...
    (N.MAX_STEPS_ONE_LATE, "finished/none"),
    (N.MAX_STEPS_ONE_EARLY, "finished/none"),
    # ... and with a budget of 1 the double count closes the chain where it is due anyway.
    (N.RESUME_BUDGET_ONE_EARLY, "budget/05:inbox.poll:inbox/kill+05:inbox.poll:inbox/kill"),
])
def test_an_older_builtin_does_not_see_the_mutant(tmp_path: Path, name: MutantName,
                                                  case_id: str) -> None:
    result = run_case(f"mutant:{name.value}", case_id, tmp_path)
    assert result.verdict is Verdict.PASS, (result.violations, result.note)
