"""Arrival timing (scenarios/arrivals.py): the points of a run, the variants and their names."""

from __future__ import annotations

import pytest

from crashmatrix.scenarios import ScenarioError, load_builtin, resolve
from crashmatrix.scenarios.arrivals import (
    Arrival,
    after_arrival,
    items,
    named,
    parse,
    points,
    variant,
    without,
)
from crashmatrix.scenarios.model import Boundary, BoundaryKind, Expect

K = BoundaryKind
START = "run_started.prompt,message.user"
RUN = [("commit.before", START), ("commit.after", START), ("inbox.poll", "inbox"),
       ("provider.before", "chat"), ("provider.after", "chat"),
       ("recovery.branch", "torn-tail-repaired"), ("effect.before", "append_note"),
       ("effect.after", "append_note"), ("inbox.poll", "inbox"), ("provider.before", "chat"),
       ("provider.after", "chat"), ("commit.after", "message.assistant")]


def test_points_are_each_kind_once_in_order_and_only_before_the_last_poll() -> None:
    assert [str(b) for b in points(RUN)] == [
        "commit.before:run_started.prompt,message.user", "commit.after:run_started.prompt,message.user",
        "inbox.poll:inbox", "provider.before:chat", "provider.after:chat", "effect.before:append_note",
        "effect.after:append_note"]


def test_a_run_without_a_poll_has_no_points_and_odd_labels_are_left_out() -> None:
    assert points([("commit.after", "x"), ("effect.after", "y")]) == []
    odd = [("effect.before", "a/b"), ("effect.before", "a b"), ("agent.own", "x"), ("inbox.poll", "inbox"),
           ("inbox.poll", "inbox")]
    assert [str(b) for b in points(odd)] == ["inbox.poll:inbox"]


def test_an_input_variant_keeps_every_expectation_and_moves_only_its_item() -> None:
    base = load_builtin()["queued-input"]
    at = Boundary(K.INBOX_POLL, "inbox")
    v = variant(base, Arrival("queued-input", "also-add-retry-log", at))
    assert v.name == "queued-input~also-add-retry-log@inbox.poll:inbox"
    assert [i.at for i in v.inputs] == [at]
    assert v.expect == base.expect
    assert v.script == base.script
    assert without(base, "also-add-retry-log").inputs == ()


def test_a_cancel_variant_expects_its_outcome_only() -> None:
    base = load_builtin()["cancel"]
    assert base.expect.lines  # the rule drops them: where the cancel cuts decides the files
    v = variant(base, Arrival("cancel", "user-cancel", Boundary(K.PROVIDER_BEFORE, "chat")))
    assert v.expect == Expect(outcome=base.expect.outcome)
    assert [str(c.at) for c in v.cancels] == ["provider.before:chat"]


def test_a_variant_is_rebuilt_from_its_name_everywhere_a_scenario_is_named() -> None:
    name = "cancel~user-cancel@commit.after:run_started.prompt,message.user"
    assert parse(name) == Arrival("cancel", "user-cancel",
                                  Boundary(K.COMMIT_AFTER, "run_started.prompt,message.user"))
    (found,) = resolve([name])
    assert found == named(name, load_builtin())
    assert found.name == name
    assert named("cancel", load_builtin()) is None  # a scenario's own name is no variant's
    for bad in ("cancel~user-cancel", "cancel~user-cancel@nowhere:x", "nosuch~x@inbox.poll:inbox",
                "cancel~nosuch@inbox.poll:inbox"):
        assert named(bad, load_builtin()) is None, bad
        with pytest.raises(ScenarioError, match="unknown scenario"):
            resolve([bad])


def test_items_and_a_wrong_item_are_named() -> None:
    base = load_builtin()["queued-input"]
    assert items(base) == ["also-add-retry-log"]
    with pytest.raises(ValueError, match="no input or cancel 'x'"):
        variant(base, Arrival("queued-input", "x", Boundary(K.INBOX_POLL, "inbox")))


def test_a_variants_crash_points_start_at_its_arrival_and_a_plain_scenarios_are_all_kept() -> None:
    from crashmatrix.harness.enumeration import single_crash_cases  # noqa: PLC0415
    from crashmatrix.harness.faults.kill import KILL  # noqa: PLC0415

    trace = [f"{kind}:{label}" for kind, label in RUN]
    variant_name = "queued-input~also-add-retry-log@inbox.poll:inbox"  # first poll: event 3
    assert after_arrival("queued-input", trace) == 0
    assert after_arrival(variant_name, trace) == 3
    assert after_arrival("queued-input~also-add-retry-log@effect.before:nowhere", trace) is None
    every = [c.schedule[0].n for c in single_crash_cases("queued-input", trace, [KILL])]
    kept = [c.schedule[0].n for c in single_crash_cases(variant_name, trace, [KILL])]
    assert kept == [n for n in every if n >= 3]  # the kill at the arrival's own event stays
    assert kept
    assert min(every) < 3
    assert single_crash_cases("queued-input~also-add-retry-log@effect.before:nowhere", trace, [KILL]) == []
