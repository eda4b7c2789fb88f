"""Which invariants a case exercised: an invariant whose situation never arose is not "held"."""

from __future__ import annotations

import dataclasses

from crashmatrix.harness.records.observation import Delivery, Request
from crashmatrix.harness.records.violation import InvariantId
from crashmatrix.harness.verify import judge
from crashmatrix.harness.verify.exercised import EXERCISED, exercised
from tests.support.observations import changelog_baseline, changelog_scenario

Inv = InvariantId


def test_every_invariant_says_what_exercises_it() -> None:
    # No invariant falls back to "always": a new one must say when it is exercised.
    assert set(EXERCISED) == set(InvariantId)


def test_the_crashed_changelog_exercises_what_it_shows_and_nothing_it_does_not() -> None:
    arose = exercised(changelog_baseline())
    # Killed after the append started, recovered, asked again, answered, settled.
    assert {Inv.AT_MOST_ONCE, Inv.SAFE_RERUN, Inv.CONTINUATION, Inv.RESUME_BUDGET, Inv.PAIRING,
            Inv.FINAL_ENDS_RUN, Inv.FINISHED_STAYS_FINISHED, Inv.NO_SILENT_SUCCESS, Inv.LIVENESS} <= arose
    # No input was delivered, no request failed, no second process ran.
    assert not arose & {Inv.QUEUED_INPUT, Inv.RETRY_INTENT, Inv.RETRY_BOUND, Inv.ONE_WRITER}


def test_a_delivered_input_a_failed_request_and_a_crash_free_run_each_change_the_set() -> None:
    obs = changelog_baseline()
    with_input = dataclasses.replace(obs, deliveries=[Delivery("input", "i1", "also this", 2, 3)])
    assert Inv.QUEUED_INPUT in exercised(with_input)
    refused = Request(len(obs.requests), [], 500, "http-500")
    failed = dataclasses.replace(obs, requests=[*obs.requests, refused])
    assert {Inv.RETRY_INTENT, Inv.RETRY_BOUND} <= exercised(failed)
    uncrashed = dataclasses.replace(obs, incarnations=[dataclasses.replace(i, crashed_at=None)
                                                       for i in obs.incarnations])
    assert not exercised(uncrashed) & {Inv.SAFE_RERUN, Inv.CONTINUATION, Inv.DURABLE_COMMITS}


def test_the_judgement_carries_the_set_in_check_order() -> None:
    judgement = judge(changelog_baseline(), changelog_scenario())
    from crashmatrix.harness.verify import CHECKS  # noqa: PLC0415

    assert judgement.exercised == [i for i in CHECKS if i in exercised(changelog_baseline())]
    assert Inv.QUEUED_INPUT not in judgement.exercised
