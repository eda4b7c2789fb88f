"""Verifier: the views checks share are built once per judgement and equal those built afresh."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.verify import calls, durable_commits, effects, judge
from crashmatrix.harness.verify.calls import call_table, call_table_of
from crashmatrix.harness.verify.durable_commits import lost_commits, lost_commits_of
from crashmatrix.harness.verify.effects import site_effects, site_effects_of
from crashmatrix.harness.verify.trace import Located, Trace, shared_trace
from crashmatrix.scenarios.model import BoundaryKind as K
from tests.support.observations import (
    changelog_baseline,
    changelog_scenario,
    late_intent_builder,
    lost_intent_builder,
    lying_success_builder,
    rerun_builder,
    reused_call_ids_builder,
)

CASES: dict[str, Callable[[], Observation]] = {
    "baseline": changelog_baseline,
    "rerun": lambda: rerun_builder().build(),
    "rerun-before-effect": lambda: rerun_builder(kill_at=K.EFFECT_BEFORE).build(),
    "late-intent": lambda: late_intent_builder().build(),
    "lost-intent": lambda: lost_intent_builder().build(),
    "lying-success": lambda: lying_success_builder().build(),
    "reused-ids": lambda: reused_call_ids_builder().build(),
}


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    calls_made: list[int] = []
    original = getattr(module, name)

    def counted(*args: object) -> object:
        calls_made.append(1)
        return original(*args)

    monkeypatch.setattr(module, name, counted)
    return calls_made


@pytest.mark.parametrize("name", sorted(CASES))
def test_judge_builds_each_shared_view_once(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    tables = _counting(monkeypatch, calls, "call_table")
    by_site = _counting(monkeypatch, effects, "site_effects")
    lost = _counting(monkeypatch, durable_commits, "lost_commits")
    judge(CASES[name](), changelog_scenario())
    assert (len(tables), len(by_site), len(lost)) == (1, 1, 1)


@pytest.mark.parametrize("name", sorted(CASES))
def test_shared_views_equal_views_built_afresh(name: str) -> None:
    obs = CASES[name]()
    fresh = Trace(obs)
    with shared_trace(obs) as trace:
        assert Trace.of(obs) is trace
        assert call_table_of(trace) is call_table_of(trace)
        assert call_table_of(trace) == call_table(obs.transcript)
        assert site_effects_of(trace) == site_effects(fresh, call_table(obs.transcript))
        assert lost_commits_of(trace) == lost_commits(fresh, obs.transcript)


@pytest.mark.parametrize("name", sorted(CASES))
def test_trace_indexes_agree_with_a_scan_and_hand_out_copies(name: str) -> None:
    obs = CASES[name]()
    trace = Trace(obs)
    incs = [None, *(i.index for i in obs.incarnations)]
    for kind in K:
        for inc in incs:
            scanned = [e for e in trace.events if e.kind == kind.value and (inc is None or e.inc == inc)]
            assert trace.of_kind(kind, inc) == scanned
    assert trace.effects() == _scanned_effects(trace)
    # A caller that changes a list it was given changes nothing for the next caller.
    trace.effects().clear()
    trace.of_kind(K.COMMIT_AFTER).clear()
    assert trace.effects() == _scanned_effects(trace)
    assert trace.of_kind(K.COMMIT_AFTER) == [e for e in trace.events if e.kind == K.COMMIT_AFTER]


def _scanned_effects(trace: Trace) -> list[Located]:
    """`Trace.effects` as a scan of every event (what the index must agree with)."""
    out = []
    for e in trace.events:
        record = trace.incarnation(e.inc)
        killed = record is not None and record.crashed_at == e.event.n
        if e.kind == K.EFFECT_AFTER or (e.kind == K.EFFECT_BEFORE and not killed):
            out.append(e)
    return out


def test_a_view_is_built_once_per_trace() -> None:
    built: list[Trace] = []

    def build(trace: Trace) -> int:
        built.append(trace)
        return len(built)

    obs = changelog_baseline()
    first, second = Trace(obs), Trace(obs)
    assert (first.view(build), first.view(build), second.view(build)) == (1, 1, 2)
    assert built == [first, second]
