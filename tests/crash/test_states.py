"""`--states` against real kills: the same cases, the same verdicts, and the audit catching a planted lie."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.adapters.interface import Capability
from crashmatrix.harness.adapters.registry import list_agents
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName
from crashmatrix.scenarios import load_builtin
from tests.support import node_apps
from tests.support.planted import COUNTER_ENV, ROOT

pytestmark = pytest.mark.crash
CLI = [sys.executable, "-m", "crashmatrix"]
# A slice of the built-ins, each for what it adds: commits, tools and torn writes
# (changelog-fast), crash loops two deep that start from a recovery's own states (budget), retried
# requests and the fake's fault schedule as part of the state (retry), several calls at once
# (parallel-calls), inputs delivered at events (queued-input). With
# CRASHMATRIX_STATES_EQUIVALENCE=all: every built-in, and every public mutant on its scenarios (the
# note of issue 17 shows that run; CI runs the slice).
EVERYTHING = os.environ.get("CRASHMATRIX_STATES_EQUIVALENCE") == "all"
SCENARIOS = tuple(sorted(load_builtin())) if EVERYTHING else (
    "changelog-fast", "budget", "retry", "parallel-calls", "queued-input")
# Mutants for what they add: a recovery that repairs wrongly, one that takes no lock (its
# intruders change the session: the host's sharing ends), one that loses an input.
MUTANTS = tuple(CATALOGUE) if EVERYTHING else (
    MutantName("repair-drops-one-more"), MutantName("recover-no-lock"), MutantName("volatile-inbox"))


def run(out: Path, *args: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    proc = subprocess.run([*CLI, "run", "--out", str(out), *args], capture_output=True, text=True,
                          timeout=600, check=False, env=env, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]


def integration_slice(cases: list[str]) -> tuple[str, ...]:
    """`--case` arguments for a slice of a framework's matrix, from its `--states` run's case ids
    (a real kill starts three framework processes, so CI runs a slice;
    CRASHMATRIX_STATES_EQUIVALENCE=all runs every case): the first crash at each kind of event."""
    if EVERYTHING:
        return ()
    by_kind: dict[str, list[str]] = {}
    for case in sorted(cases):
        if case.count(":") >= 2:
            by_kind.setdefault(case.split(":")[1], []).append(case)
    assert len(by_kind) >= 4, cases  # commits, effects, requests: the slice spans them
    chosen = sorted(found[0] for found in by_kind.values())
    return tuple(a for c in chosen for a in ("--case", c))


def essentials(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("verdict", "branches", "commits", "requests", "exit_codes", "trace")
    return {r["case"]: {**{k: r[k] for k in keys},
                        "invariants": sorted({v["invariant"] for v in r["violations"]})} for r in rows}


# Each with the fault kinds that can kill it: a mutant only a power loss or a failed fsync kills is
# run with that kind (which `--states` runs as real kills: it acts on what was synced).
# Every framework integration that declares its state in the tree (issue 35: each declares it
# only once `--audit-states 1` over the built-ins it can run found no difference), on the slice
# every one of them runs: the same verdicts, invariants, requests and traces as real kills.
OURS = ("durable-agent", "messages-only")
INTEGRATIONS = tuple(a.name for a in list_agents()
                     if Capability.STATE_IN_TREE.value in a.capabilities and a.name not in OURS)
AGENTS = [("durable-agent", SCENARIOS, ()), ("messages-only", ("changelog-fast",), ()),
          *((f"mutant:{m.value}", CATALOGUE[m].scenarios, CATALOGUE[m].faults or ()) for m in MUTANTS),
          *((name, ("changelog-fast",), ()) for name in INTEGRATIONS)]


@pytest.mark.parametrize(("agent", "names", "faults"), AGENTS, ids=[a for a, _, _ in AGENTS])
def test_states_give_every_case_the_verdict_a_real_kill_gives(tmp_path: Path, agent: str,
                                                               names: tuple[str, ...],
                                                               faults: tuple[str, ...]) -> None:
    if agent in node_apps.EXAMPLES:
        node_apps.ready(ROOT / "examples" / node_apps.EXAMPLES[agent])
    scenarios = [a for s in names for a in ("--scenario", s)] + [a for f in faults for a in ("--fault", f)]
    states = essentials(run(tmp_path / "states", "--agent", agent, "--states", *scenarios))
    if agent in INTEGRATIONS:
        scenarios += integration_slice(list(states))
    real = essentials(run(tmp_path / "kill", "--agent", agent, *scenarios))
    if agent in INTEGRATIONS and not EVERYTHING:  # the slice, and the recording beside it
        assert set(real) < set(states)
        states = {c: states[c] for c in real}
    assert set(states) == set(real)
    different = {c: (states[c], real[c]) for c in real if states[c] != real[c]}
    assert not different, json.dumps(different, indent=1)[:3000]
    if agent not in ("durable-agent", *INTEGRATIONS):  # a mutant, and the baseline, are caught the same way
        assert any(v["verdict"] == "fail" for v in states.values())


def test_second_process_cases_share_one_host_while_its_intruders_change_nothing(tmp_path: Path) -> None:
    """Our agent refuses every intruder: one host serves every `second` point. The baseline's
    first intruder changes the session: that point gets the host, the rest run as real kills (and
    the verdicts are a real kill's: the test above)."""
    for agent, served in (("durable-agent", "all"), ("messages-only", "one")):
        out = tmp_path / agent
        proc = subprocess.run([*CLI, "run", "--out", str(out), "--agent", agent, "--scenario",
                               "changelog-fast", "--fault", "second", "--states"], capture_output=True,
                              text=True, timeout=600, check=False, cwd=ROOT)
        assert proc.returncode in (0, 1), proc.stderr
        rows = (out / "results.jsonl").read_text(encoding="utf-8").splitlines()
        points = sum(1 for r in rows if json.loads(r)["case"].endswith("/second"))
        assert points > 1
        expected = points if served == "all" else 1
        assert f"{expected} second-process points -> 1 host;" in proc.stderr, proc.stderr


def test_every_mutant_is_killed_by_the_same_case_with_states() -> None:
    chosen = [a for m in MUTANTS for a in ("--mutant", m.value)]
    hunts = {}
    for mode in ((), ("--states",)):
        proc = subprocess.run([*CLI, "mutants", "--json", *chosen, *mode], capture_output=True, text=True,
                              timeout=900, check=False, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr
        hunts[mode] = json.loads(proc.stdout)
    assert hunts[()] == hunts[("--states",)]
    assert len(hunts[()]) == len(MUTANTS)


def test_the_audit_finds_an_agent_whose_recovery_reads_outside_its_tree(tmp_path: Path) -> None:
    env = {**os.environ, COUNTER_ENV: str(tmp_path / "counter")}
    rows = run(tmp_path / "o", "--agent", "tests.support.planted:ADAPTER", "--scenario", "changelog-fast",
               "--fault", "kill", "--states", "--audit-states", "1", "--jobs", "1", env=env)
    flagged = [r for r in rows if r["verdict"] == "nondeterministic"]
    assert flagged, [(r["case"], r["verdict"]) for r in rows]
    assert all("differs from a real kill" in r["note"] for r in flagged)


def test_an_agent_that_does_not_declare_its_state_in_tree_is_refused(tmp_path: Path) -> None:
    toy = ROOT / "examples" / "toy_agent"
    proc = subprocess.run([*CLI, "run", "--states", "--agent", "toyagent.adapter:AGENT", "--scenario",
                           "changelog-fast", "--out", str(tmp_path / "o")], capture_output=True, text=True,
                          timeout=60, check=False, cwd=toy)
    assert proc.returncode == 2, proc.stderr
    assert "does not declare 'state-in-tree'" in proc.stderr


def test_a_run_with_a_second_process_is_no_state_for_its_children() -> None:
    """Its intruder is part of what a child is judged on (one-writer): the child runs as a kill."""
    from crashmatrix.harness.cli.matrix_setup import runner_config  # noqa: PLC0415 - the CLI's own setup
    from crashmatrix.harness.execution.crash_states import CrashStates  # noqa: PLC0415
    from crashmatrix.harness.execution.runner import CaseRunner  # noqa: PLC0415
    from crashmatrix.harness.records.case import Case  # noqa: PLC0415
    from crashmatrix.scenarios import load_builtin  # noqa: PLC0415

    scenario = load_builtin()["changelog-fast"]
    parent = Case.parse("changelog-fast/14:effect.before:append_note/second")
    child = Case.parse("changelog-fast/14:effect.before:append_note/second+01:recovery.branch:"
                       "nothing.no_open_run/kill")
    with runner_config("durable-agent", 60.0, False, False) as cfg:
        states = CrashStates(CaseRunner(cfg), cfg.work_root)
        obs = states.record(parent, scenario, may_extend=True)
        assert obs.intrusions, "the parent ran a second process"
        assert not states.usable(child, scenario)


def test_the_memory_bench_runs_until_its_target_and_leaves_no_snapshot_behind() -> None:
    from crashmatrix.harness.cli.bench_memory import measure_memory  # noqa: PLC0415
    from crashmatrix.harness.cli.matrix_setup import runner_config  # noqa: PLC0415 - the CLI's own setup
    from crashmatrix.scenarios import load_builtin  # noqa: PLC0415

    # Capped at depth 1 by its [matrix] max_depth: a small matrix, so the target takes two runs.
    scenario = load_builtin()["policy-loosened"]
    with runner_config("durable-agent", 60.0, False, False) as cfg:
        one = measure_memory([scenario], cfg, jobs=2, target=1, sample_every=10)
        figures = measure_memory([scenario], cfg, jobs=2, target=one.cases + 1, sample_every=10)
    assert figures.runs == 2
    assert figures.cases == 2 * one.cases
    assert len(figures.samples_mb) == figures.cases // 10
    assert figures.states_left_bytes == 0, "every snapshot is deleted once its scenario's cases finish"


def _masked(dir_name: Any, *parts: Any) -> str:
    return str(dir_name.sub("D", json.dumps(parts, sort_keys=True)))


def _requests_by_case(names: tuple[str, ...], depth: int, states: bool) -> dict[str, Any]:
    """Every case's provider requests (what was asked and answered, the case directory's name
    masked) and where each incarnation's requests start, from an in-process matrix."""
    import re  # noqa: PLC0415

    from crashmatrix.harness.cli.matrix_setup import adapter_named, runner_config, scenarios_named  # noqa: PLC0415
    from crashmatrix.harness.execution.matrix import Matrix, MatrixConfig  # noqa: PLC0415
    from crashmatrix.harness.records.observation import Observation  # noqa: PLC0415
    from crashmatrix.harness.records.results import CaseResult  # noqa: PLC0415
    from crashmatrix.scenarios.model import Scenario  # noqa: PLC0415

    seen: dict[str, Any] = {}
    dir_name = re.compile(r"[a-z0-9_-]+-[0-9a-f]{12}")
    with runner_config("durable-agent", 60.0, False, False, resolved=adapter_named("durable-agent")) as cfg:
        matrix = Matrix(MatrixConfig(scenarios=scenarios_named(names, ()), runner=cfg, depth=depth, jobs=2,
                                     states=states))
        evaluate = matrix._evaluate

        def keep(obs: Observation, scenario: Scenario, started: float) -> CaseResult:
            seen[obs.case.case_id] = (
                [(q.index, q.status, q.rule, q.fault, _masked(dir_name, q.messages, q.reply))
                 for q in obs.requests],
                [(i.index, i.command, i.requests_before) for i in obs.incarnations])
            return evaluate(obs, scenario, started)

        matrix._evaluate = keep  # type: ignore[method-assign]
        matrix.run(lambda result, known: None)
        if states:
            assert sum(matrix.states.tally.points.values()) > sum(matrix.states.tally.distinct.values())
    return seen


@pytest.mark.parametrize(("names", "depth"), [(("changelog-fast", "retry", "queued-input"), 1),
                                              *([(("finished",), 2)] if EVERYTHING else [])])
def test_a_shared_recovery_gives_each_case_the_requests_a_real_kill_gives(names: tuple[str, ...],
                                                                          depth: int) -> None:
    """States are keyed without the fake's request log (a kill before a request and one after its
    reply, with nothing written between, share a recovery): each case still gets its own requests
    before the kill, then the recovery's, numbered after them, as a real kill would have them."""
    real, states = _requests_by_case(names, depth, False), _requests_by_case(names, depth, True)
    assert set(real) == set(states)
    different = [c for c in real if real[c] != states[c]]
    assert not different, json.dumps({c: (real[c], states[c]) for c in different[:2]}, indent=1)[:3000]


def test_cases_that_end_in_the_same_state_share_one_settle_run(tmp_path: Path) -> None:
    """A settle run is kept by the final state it ran on; the case's own URL on the fakes (with
    its random bits) must not make every final state look new (it did, from issue 33 until issue
    35's mend: no settle was ever reused)."""
    rows = run(tmp_path, "--scenario", "changelog-fast", "--states", "--fault", "kill")
    assert {r["verdict"] for r in rows} == {"pass"}
    shared = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))["crash_states"]
    assert shared["settles_reused"] > 0, shared
