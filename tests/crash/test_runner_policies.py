"""Which tool policies each incarnation gets: restart policies are for incarnations that recover."""

from __future__ import annotations

import pytest

from crashmatrix.harness.cli.matrix_setup import runner_config
from crashmatrix.harness.execution.runner import CaseRunner
from crashmatrix.harness.records.case import Case
from crashmatrix.scenarios import load_builtin

pytestmark = pytest.mark.crash
SCENARIO = load_builtin()["policy-loosened"]  # append_note: never at first, safe on restart


def _incarnations(case_id: str) -> list[tuple[str, str]]:
    with runner_config("durable-agent", 30.0, False, False, "fresh") as cfg:
        obs = CaseRunner(cfg).run(Case.parse(case_id), SCENARIO)
    return [(i.command, i.policies["append_note"]) for i in obs.incarnations]


def test_a_run_reissued_before_the_task_was_accepted_keeps_the_first_policies() -> None:
    # Killed at its first event, the first incarnation stored nothing: the task is run again,
    # as a first run, and only the settle incarnation (a recovery) sees the loosened policy.
    assert _incarnations("policy-loosened/01:recovery.branch:nothing.no_open_run/kill") == [
        ("run", "never"), ("run", "never"), ("recover", "safe")]


def test_recoveries_get_the_restart_policies() -> None:
    assert _incarnations("policy-loosened/13:commit.after:tool_started.append_note/kill") == [
        ("run", "never"), ("recover", "safe"), ("recover", "safe")]
