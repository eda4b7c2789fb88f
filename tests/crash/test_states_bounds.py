"""`--states` within bounds: a sparse file costs a state nothing; past a bound, real kills, saying why."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.execution.crash_states import CrashStates
from crashmatrix.harness.execution.snapshot_limits import Limits, Refusal
from crashmatrix.harness.execution.states_tally import Tally
from crashmatrix.harness.records.results import CaseResult
from tests.support.bash_scenario import bash_then_append
from tests.support.planted import ROOT

pytestmark = pytest.mark.crash
KEYS = ("verdict", "branches", "commits", "requests", "exit_codes", "trace", "invariants")

def scenario_dir(root: Path, name: str, what: str, command: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    text = bash_then_append(f"{what} in the workspace", f"{command}; echo prepared")
    (root / f"{name}.toml").write_text(text, encoding="utf-8")
    return root


def matrix_run(names: tuple[str, ...], dirs: tuple[str, ...], states: bool,
               limits: Limits | None = None) -> tuple[dict[str, dict[str, Any]], Tally | None]:
    """Every case's essentials from an in-process matrix, and its states' tally."""
    from crashmatrix.harness.cli.matrix_setup import adapter_named, runner_config, scenarios_named  # noqa: PLC0415
    from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig  # noqa: PLC0415

    rows: dict[str, dict[str, Any]] = {}
    with runner_config("durable-agent", 60.0, False, False, resolved=adapter_named("durable-agent")) as cfg:
        matrix = Matrix(MatrixConfig(scenarios=scenarios_named(names, dirs), runner=cfg, jobs=2,
                                     states=states, scenario_dirs=list(dirs)))
        if limits is not None:
            assert matrix.states is not None
            matrix.states = CrashStates(matrix.runner, cfg.work_root, 2, limits, slots=matrix.slots)

        def keep(result: CaseResult, known: int) -> None:
            rows[result.case] = {k: getattr(result, k) for k in KEYS}

        matrix.run(keep)
    return rows, matrix.states.tally if matrix.states is not None else None


def same_as_real_kills(names: tuple[str, ...], dirs: tuple[str, ...],
                       limits: Limits | None = None) -> Tally:
    real, _ = matrix_run(names, dirs, False)
    states, tally = matrix_run(names, dirs, True, limits)
    assert set(states) == set(real), "the same case ids"
    different = {c: (states[c], real[c]) for c in real if states[c] != real[c]}
    assert not different, json.dumps(different, indent=1, default=str)[:3000]
    assert tally is not None
    return tally


def test_a_sparse_file_costs_a_state_nothing_and_its_cases_get_a_real_kill_s_verdicts(tmp_path: Path) -> None:
    """L6: with a 200 MB sparse file in the tree, --states was 14 times slower than real kills,
    held 2.9 GB and wrote 1 GB of tmpfs, and a case failed one-writer that a real kill passes."""
    dirs = (str(scenario_dir(tmp_path / "s", "sparse", "a 64M sparse file",
                             "truncate -s 64M sparse.bin; printf data >> sparse.bin")),)
    tally = same_as_real_kills(("sparse",), dirs)
    assert tally.points["sparse"] > 0, "its crash points started from states"
    assert not tally.unkept, tally.unkept_lines()


def test_a_state_over_a_bound_runs_as_real_kills_and_the_run_says_why(tmp_path: Path) -> None:
    dirs = (str(scenario_dir(tmp_path / "s", "dense", "a dense 64K file",
                             "head -c 65536 /dev/urandom > dense.bin")),)
    tally = same_as_real_kills(("dense",), dirs, Limits(file_bytes=16 << 10))
    assert tally.unkept["dense", Refusal.FILE] > 0
    assert tally.points["dense"] > 0, "the states before the file was made were kept"
    lines = tally.unkept_lines()
    assert len(lines) == 1, lines
    assert "ws/dense.bin holds 64 KiB of data, over the 16 KiB bound" in lines[0], lines
    assert "crash points ran as real kills, their states not kept (file-bound: " in lines[0], lines


def test_a_recording_past_its_cap_of_states_runs_the_rest_as_real_kills() -> None:
    """P5: an agent that retried far past its limit kept a snapshot at each of thousands of events."""
    tally = same_as_real_kills(("changelog-fast",), (), Limits(states=5))
    assert tally.unkept["changelog-fast", Refusal.STATES] > 0
    assert tally.points["changelog-fast"] > 0


def test_past_the_matrix_s_budget_nothing_more_is_kept_and_the_verdicts_stand() -> None:
    """P5: the recoveries kept for sharing (each with the requests and events of a runaway's retries)
    grew with every distinct state until the scenario ended."""
    tally = same_as_real_kills(("changelog-fast",), (), Limits(matrix_bytes=10_000))
    assert tally.unkept["changelog-fast", Refusal.MATRIX] > 0, "snapshots past the budget: real kills"
    assert tally.unshared["changelog-fast"] > 0, "recoveries past the budget: not kept for others"
    assert any("recoveries not kept for later cases (matrix-cap" in line for line in tally.unkept_lines())


def test_the_command_line_says_which_crash_points_ran_as_real_kills(tmp_path: Path) -> None:
    """Over the default bound (a 40 MiB file of data): no state is kept, and stderr says why."""
    dirs = scenario_dir(tmp_path / "s", "dense", "a dense 40M file", "head -c 40M /dev/zero > dense.bin")
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run
    proc = run([sys.executable, "-m", "crashmatrix", "run", "--out", str(tmp_path / "o"), "--scenarios",
                str(dirs), "--scenario", "dense", "--fault", "kill", "--states"],
               capture_output=True, text=True, timeout=600, check=False, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "dense: " in proc.stderr, proc.stderr
    assert ("ran as real kills, their states not kept (file-bound: ws/dense.bin holds 40 MiB of data"
            in proc.stderr), proc.stderr
