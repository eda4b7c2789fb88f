"""`--arrivals`: each input and cancel of the selected scenarios also delivered at every kind of point.

The points come from a run of the scenario without that item (scenarios/arrivals.py says why),
made here before the matrix starts: one crash-free run per item, by the matrix's runner, in a
case directory of its own (`<scenario>~<item>`), kept nowhere and measured by no coverage. Each
point gives a variant scenario, which the matrix then runs like any other (its recording, its
crash points). Scenarios without inputs or cancels, and variants named already (`--case`), are
left as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import msgspec

from crashmatrix.harness.execution.runner import CaseRunner, RunnerConfig
from crashmatrix.harness.records.case import Case
from crashmatrix.scenarios import arrivals
from crashmatrix.scenarios.model import Scenario


def with_arrivals(scenarios: list[Scenario], config: RunnerConfig, jobs: int = 1,
                  note: Callable[[str], None] = lambda _: None) -> list[Scenario]:
    """`scenarios`, each followed by its arrival variants (in item, then point order), each once."""
    runner = CaseRunner(dataclasses.replace(config, keep=False, coverage_dir=None))
    wanted = [(s, item) for s in scenarios if arrivals.parse(s.name) is None for item in arrivals.items(s)]

    def points(pair: tuple[Scenario, str]) -> list[arrivals.Arrival]:
        scenario, item = pair
        # Named apart from the scenario's own recording (and from the other items' runs), so no
        # two runs share a case directory.
        alone = msgspec.structs.replace(arrivals.without(scenario, item),
                                        name=f"{scenario.name}{arrivals.MARK}{item}")
        obs = runner.run(Case(alone.name), alone)
        events = [(e.kind, e.label) for e in (obs.incarnations[0].events if obs.incarnations else [])]
        found = arrivals.points(events)
        # The point the scenario itself names (by its first event) is the scenario: no variant.
        mine = arrivals.first_at(events, arrivals.at_of(scenario, item))
        if not found:
            why = ("its agent reported no inbox.poll event" if events
                   else "the run reported no event at all")
            note(f"{scenario.name}: {item}: no arrival variants: in the run without it {why}")
        return [arrivals.Arrival(scenario.name, item, at) for at in found
                if arrivals.first_at(events, at) != mine]

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        # Keyed by name: a scenario holds mappings, so it is no dictionary key.
        found = {(s.name, item): chosen for (s, item), chosen in zip(wanted, pool.map(points, wanted),
                                                                        strict=True)}
    out: dict[str, Scenario] = {}
    for scenario in scenarios:
        out.setdefault(scenario.name, scenario)
        for item in arrivals.items(scenario) if arrivals.parse(scenario.name) is None else []:
            for a in found[scenario.name, item]:
                out.setdefault(a.name, arrivals.variant(scenario, a))
    return list(out.values())

