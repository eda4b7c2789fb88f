"""Selecting fault kinds (`--fault`), where `power` is enumerated, and what a power case's result says."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.adapters.baseline import MessagesOnlyAdapter
from crashmatrix.harness.adapters.durable import ADAPTER as DURABLE
from crashmatrix.harness.adapters.interface import Capability
from crashmatrix.harness.enumeration import single_crash_cases, steps_from_trace
from crashmatrix.harness.evaluate import repro_command
from crashmatrix.harness.faults.interface import AtCrash, by_default_of, observes_of
from crashmatrix.harness.faults.power import POWER, POWER_KEEP1
from crashmatrix.harness.faults.registry import check_selection, faults_for
from crashmatrix.harness.records.run_record import RunOptions, RunRecord
from crashmatrix.harness.records.violation import InvariantId
from tests.support.observations import changelog_baseline, check, ids


class NoFileStore(MessagesOnlyAdapter):
    """An agent whose store is not files in its session directory (a database server's, say)."""

    name = "no-files"
    capabilities = MessagesOnlyAdapter.capabilities - {Capability.FILE_STORE}


POINTS = ["commit.before:run_started", "commit.written:run_started", "commit.after:run_started",
          "effect.after:append_note"]


def test_the_default_set_is_unchanged_and_power_runs_only_when_selected() -> None:
    # The downstream faults are in the default set too, but act only at downstream requests: at
    # probe events the default matrix is still kill, second and torn.
    default = faults_for(DURABLE)
    assert [f.name for f in default] == ["error-after-apply", "error-before-apply", "kill",
                                         "kill-after-apply", "reply-lost", "second", "timeout", "torn"]
    assert sorted({s.fault for s in steps_from_trace(POINTS, default)}) == ["kill", "second", "torn"]
    assert [f.name for f in faults_for(DURABLE, ("power",))] == ["power"]
    assert [f.name for f in faults_for(DURABLE, ("torn", "power-keep1"))] == ["power-keep1", "torn"]


def test_power_is_enumerated_where_written_and_synced_differ_with_readable_ids() -> None:
    cases = single_crash_cases("s", POINTS, faults_for(DURABLE, ("power", "kill")))
    assert [c.case_id for c in cases] == [
        "s/01:commit.before:run_started/kill",
        "s/02:commit.written:run_started/kill", "s/02:commit.written:run_started/power",
        "s/03:commit.after:run_started/kill", "s/03:commit.after:run_started/power",
        "s/04:effect.after:append_note/kill"]


def test_power_observes_and_kills_and_is_not_in_the_default_set() -> None:
    for fault in (POWER, POWER_KEEP1):
        assert fault.at_crash is AtCrash.KILL
        assert observes_of(fault)
        assert not by_default_of(fault)
    assert (POWER.keep, POWER_KEEP1.keep) == (0, 1)


def test_a_fault_kind_written_before_the_members_neither_observes_nor_leaves_the_default_set() -> None:
    class Old:
        name = "old"

    assert not observes_of(Old())  # type: ignore[arg-type]
    assert by_default_of(Old())  # type: ignore[arg-type]


def test_a_selection_names_an_unknown_fault_and_one_the_agent_cannot_take() -> None:
    assert check_selection(("power",), DURABLE) == []
    assert check_selection(("powr", "power"), NoFileStore()) == [
        "--fault powr: unknown fault (known: eio-fsync, enospc-write, error-after-apply, "
        "error-before-apply, kill, kill-after-apply, power, power-blocks, power-keep1, power-names, "
        "power-subsets, "
        "reply-lost, second, short-write, timeout, torn)",
        "--fault power: needs file-store, which agent 'no-files' does not declare"]


def test_a_power_case_repro_names_fsync_only_when_it_is_off() -> None:
    case = "changelog/04:commit.after:run_started/power"
    assert repro_command(case, [], fsync=True, fsync_default=True) == f"crashmatrix repro {case}"
    assert repro_command(case, [], fsync=False, fsync_default=True) == f"crashmatrix repro {case} --fsync off"
    assert repro_command("c/none", [], fsync=True) == "crashmatrix repro c/none --fsync on"


def test_run_json_keeps_the_selection_and_none_still_means_the_default_set(tmp_path: Path) -> None:
    selected = RunRecord(declared_branches=(), options=RunOptions(agent="a", faults=("power",)))
    back = RunRecord.from_json(selected.to_json(), tmp_path / "run.json")
    assert back.options.faults == ("power",)
    default = RunOptions(agent="a")
    assert "faults" not in default.unrecorded()
    assert default.differences(back.options) == [("faults", None, ("power",))]


def test_a_store_a_power_loss_emptied_after_acknowledged_commits_is_a_durable_commits_violation() -> None:
    # What `power` leaves of an agent that never synced: the session's log is gone.
    obs = changelog_baseline()
    obs.transcript.labels = {}
    obs.transcript.commits = 0
    violations = check(obs)
    assert InvariantId.DURABLE_COMMITS in ids(violations)
    lost = [v for v in violations if v.invariant is InvariantId.DURABLE_COMMITS]
    assert "the final store holds no commit 1 (it holds 0)" in lost[0].message
