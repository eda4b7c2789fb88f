"""`--arrivals`: each input and cancel of the selected scenarios also delivered at every kind of point.

The points come from a run of the scenario without that item (scenarios/arrivals.py says why),
made here before the matrix starts: one crash-free run per item, by the same runner the matrix
uses. Each point gives a variant scenario, which the matrix then runs like any other (its recording,
its crash points). The scenarios without inputs or cancels are left as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from crashmatrix.harness.execution.runner import CaseRunner, RunnerConfig
from crashmatrix.harness.records.case import Case
from crashmatrix.scenarios import arrivals
from crashmatrix.scenarios.model import Boundary, Scenario


def with_arrivals(scenarios: list[Scenario], config: RunnerConfig, jobs: int = 1,
                  note: Callable[[str], None] = lambda _: None) -> list[Scenario]:
    """`scenarios`, each followed by its arrival variants (in item, then point order)."""
    runner = CaseRunner(config)
    wanted = [(s, item) for s in scenarios for item in arrivals.items(s)]

    def points(pair: tuple[Scenario, str]) -> list[arrivals.Arrival]:
        scenario, item = pair
        obs = runner.run(Case(scenario.name), arrivals.without(scenario, item))
        events = [(e.kind, e.label) for e in (obs.incarnations[0].events if obs.incarnations else [])]
        found = arrivals.points(events)
        # The point the scenario itself names (by its first event) is the scenario: no variant.
        mine = _first(events, arrivals.at_of(scenario, item))
        chosen = [arrivals.Arrival(scenario.name, item, at) for at in found if _first(events, at) != mine]
        if not found:
            note(f"{scenario.name}: {item}: no arrival variants, the run without it polls no inbox "
                 "(its agent reports no inbox.poll events)")
        return chosen

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        # Keyed by name: a scenario holds mappings, so it is no dictionary key.
        found = {(s.name, item): chosen for (s, item), chosen in zip(wanted, pool.map(points, wanted),
                                                                        strict=True)}
    out: list[Scenario] = []
    for scenario in scenarios:
        out.append(scenario)
        for item in arrivals.items(scenario):
            out += [arrivals.variant(scenario, a) for a in found[scenario.name, item]]
    return out


def _first(events: list[tuple[str, str]], at: Boundary) -> int | None:
    return next((k for k, (kind, label) in enumerate(events) if at.matches(kind, label)), None)
