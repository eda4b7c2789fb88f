"""`--states` keeps FIFOs and sockets an agent made; `--audit-states` compares contents, finds one lost."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.execution import states as states_module
from crashmatrix.harness.records.results import Verdict
from tests.crash.test_states_bounds import scenario_dir

pytestmark = pytest.mark.crash
# The hostile kit's tree-fiforead: the bash tool leaves a FIFO, a socket and links in the
# workspace (the socket bound by a process that then exits), and the agent reads the FIFO.
NODES = ("rm -f fifo sock; mkfifo fifo; ln -s / rootlink; python3 -c "
         "\"import socket; s = socket.socket(socket.AF_UNIX); s.bind('sock')\"")


def observed(tmp_path: Path, states: bool, audit: float = 0.0) -> dict[str, Any]:
    """Every case's verdict, note and final workspace, from an in-process matrix."""
    from crashmatrix.harness.cli.matrix_setup import adapter_named, runner_config, scenarios_named  # noqa: PLC0415
    from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig  # noqa: PLC0415
    from crashmatrix.harness.records.observation import Observation  # noqa: PLC0415
    from crashmatrix.harness.records.results import CaseResult  # noqa: PLC0415
    from crashmatrix.scenarios.model import Scenario  # noqa: PLC0415

    dirs = (str(scenario_dir(tmp_path / "s", "nodes", "a FIFO and a socket", NODES)),)
    seen: dict[str, Any] = {}
    with runner_config("durable-agent", 60.0, False, False, resolved=adapter_named("durable-agent")) as cfg:
        matrix = Matrix(MatrixConfig(scenarios=scenarios_named(("nodes",), dirs), runner=cfg, jobs=2,
                                     states=states, audit_states=audit, scenario_dirs=list(dirs)))
        evaluate = matrix._evaluate
        workspaces: dict[str, dict[str, str]] = {}

        def keep(obs: Observation, scenario: Scenario, started: float) -> CaseResult:
            workspaces.setdefault(obs.case.case_id, dict(obs.workspace_after))  # the first: ours
            return evaluate(obs, scenario, started)

        matrix._evaluate = keep  # type: ignore[method-assign]

        def result(r: CaseResult, known: int) -> None:
            seen[r.case] = (r.verdict, r.note, workspaces[r.case])

        matrix.run(result)
    return seen


def test_a_fifo_and_a_socket_are_in_every_state_a_real_kill_leaves_them_in(tmp_path: Path) -> None:
    """W1: 16 cases saw "no such file" where a real kill sees the FIFO."""
    real, states = observed(tmp_path / "real", False), observed(tmp_path / "states", True, audit=1.0)
    assert set(real) == set(states)
    made = [c for c, (_, _, ws) in real.items() if "fifo" in ws]
    assert len(made) > 10, "most cases crash after the FIFO was made"
    for case in made:
        assert states[case][2].get("fifo") == real[case][2]["fifo"] == "<fifo: not read>", case
        assert states[case][2].get("sock") == "<socket: not read>", case
    assert not [c for c, (v, _, _) in states.items() if v is Verdict.NONDETERMINISTIC], \
        "the audit finds every state as the agent left it"
    assert {c: v for c, (v, _, _) in states.items()} == {c: v for c, (v, _, _) in real.items()}


def test_the_audit_finds_a_state_that_dropped_the_agent_s_fifo(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """W1: the audit compared counts, and a state without the FIFO had the same counts."""
    read_tree = states_module.read_tree

    def dropping(*args: Any, **kwargs: Any) -> states_module.Tree:  # the snapshot as it was
        tree = read_tree(*args, **kwargs)
        return states_module.Tree(tuple(e for e in tree.entries
                                        if not (stat.S_ISFIFO(e[1]) or stat.S_ISSOCK(e[1]))))

    monkeypatch.setattr(states_module, "read_tree", dropping)
    seen = observed(tmp_path, True, audit=1.0)
    flagged = {c: note for c, (v, note, _) in seen.items() if v is Verdict.NONDETERMINISTIC}
    assert len(flagged) > 10, sorted(seen)
    assert all("tree at the crash ws/fifo: restored absent, as the agent left it 'fifo " in n
               for n in flagged.values()), list(flagged.values())[:2]
