"""The freeze chain: clean intruders pass the host on; the first that changes anything ends the sharing."""

from __future__ import annotations

from crashmatrix.harness.execution.freeze_chain import FreezeChain
from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.observation import IncarnationRecord, Intrusion, Observation


def step(n: int) -> CrashStep:
    return CrashStep(n, "commit.before", "x", fault="second")


def intrusion(n: int) -> Intrusion:
    return Intrusion(holder=1, holder_pid=n, holder_command="agent run", output="",
                     record=IncarnationRecord(1, "recover", {}, intruder=True), requests_after=0)


def observation() -> Observation:
    return Observation(case=Case("s", (step(5),)), incarnations=[], transcript=None,  # type: ignore[arg-type]
                       requests=[], workspace_before={}, workspace_after={})


def test_clean_intruders_move_the_host_to_the_next_point_and_keep_their_record() -> None:
    chain = FreezeChain([step(9), step(2), step(5)])
    assert chain.first.n == 2, "points are taken in event order"
    mine = [intrusion(2)]
    assert chain.frozen(2, "k", "k", mine) == step(5)
    assert mine == [], "a clean intrusion is the point's, not the host's"
    assert chain.outcomes[2].result().clean == intrusion(2)
    assert chain.frozen(5, "k", "k", [intrusion(5)]) == step(9)
    assert not chain.done
    assert chain.frozen(9, "k", "k", [intrusion(9)]) is None
    assert chain.done, "every point clean: the host may stop"


def test_the_first_intruder_that_changes_anything_gets_the_host_and_later_points_run_as_kills() -> None:
    chain = FreezeChain([step(2), step(5), step(9)])
    chain.frozen(2, "k", "k", [intrusion(2)])
    kept = [intrusion(5)]
    assert chain.frozen(5, "k", "changed", kept) is None, "the host runs on as this point's case"
    assert kept == [intrusion(5)]
    assert not chain.done
    assert chain.perturbed == 5
    later = chain.outcomes[9].result(timeout=0)
    assert (later.clean, later.observation) == (None, None), "never reached cleanly: a real kill"
    host = observation()
    chain.finish(host)
    assert chain.outcomes[5].result().observation is host
    assert chain.outcomes[2].result().clean == intrusion(2), "an earlier clean point keeps its record"


def test_a_host_that_failed_leaves_every_open_point_to_a_real_run() -> None:
    chain = FreezeChain([step(2), step(5)])
    chain.finish(None)
    assert all(f.result().clean is None and f.result().observation is None for f in chain.outcomes.values())
