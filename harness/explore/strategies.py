"""Hypothesis strategies: plans (turns, policies, faults, an input or a cancel) and crash draws.

Everything shrinks toward the simplest thing: one turn of one read, default policies, no fault,
no interrupt, one crash at the first effect. Crash points are drawn as indices and mapped onto
the traces only when the case runs (see schedule.py), since event numbers are not known before.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from crashmatrix.harness.explore.plan import (
    Action,
    ActionKind,
    Care,
    FaultSpec,
    Interrupt,
    InterruptKind,
    Plan,
)
from crashmatrix.harness.explore.schedule import Draw
from crashmatrix.harness.explore.variants import Generated, Given, Variant
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.faults.torn import TORN
from crashmatrix.scenarios.model import CallIds, Policy, ProviderFault, Scenario

MAX_TURNS = 3
MAX_PARALLEL = 2  # calls in one assistant message
MAX_FAULTS = 2  # below the agent's default of three retries, so a run never fails of them
MAX_CRASHES = 3  # at most the default resume budget, so a correct run is never aborted
MAX_INDEX = 63
NEAR = 5
# Timeouts are left out: they cost the agent's whole provider timeout, and a short timeout
# would make a slow machine look like a fault.
PROVIDER_FAULTS = (ProviderFault.HTTP_500, ProviderFault.HTTP_429, ProviderFault.DROP)


def _number(shape: list[list[tuple[ActionKind, Care]]]) -> tuple[tuple[Action, ...], ...]:
    """Slots in call order. Bash results share one result key (bash has no path), so the
    progress of two bash calls cannot be told apart: a second bash becomes a write."""
    turns: list[tuple[Action, ...]] = []
    slot = 0
    seen_bash = False
    for turn in shape:
        actions = []
        for drawn, care in turn:
            kind = ActionKind.WRITE if drawn is ActionKind.BASH and seen_bash else drawn
            seen_bash = seen_bash or drawn is ActionKind.BASH
            actions.append(Action(kind, slot, care if kind is ActionKind.APPEND else Care.CHECK))
            slot += 1
        turns.append(tuple(actions))
    return tuple(turns)


def boundaries(turns: tuple[tuple[Action, ...], ...], kind: InterruptKind) -> list[str]:
    """Where an interrupt may arrive. An input must surely arrive before the run completes, so
    only boundaries every crash schedule reaches qualify; a cancel may arrive anywhere."""
    found = ["inbox.poll", "provider.after:reply"]
    for turn in turns:
        for a in turn:
            if kind is InterruptKind.CANCEL or a.guaranteed:
                point = f"effect.after:{a.tool.value}"
                if point not in found:
                    found.append(point)
    return found


@st.composite
def plans(draw: st.DrawFn, interrupts: bool = True) -> Plan:
    """`interrupts`: whether the agent has an inbox to deliver inputs and cancels to."""
    action = st.tuples(st.sampled_from(ActionKind), st.sampled_from(Care))
    shape = draw(st.lists(st.lists(action, min_size=1, max_size=MAX_PARALLEL),
                          min_size=1, max_size=MAX_TURNS))
    turns = _number(shape)
    faults = draw(st.lists(st.builds(FaultSpec, st.sampled_from(PROVIDER_FAULTS),
                                     st.integers(0, len(turns))), max_size=MAX_FAULTS))
    interrupt = None
    kind = draw(st.none() | st.sampled_from(InterruptKind)) if interrupts else None
    if kind is not None:
        interrupt = Interrupt(kind, draw(st.sampled_from(boundaries(turns, kind))))
    # Appends and commands stay never-replay: re-running them is never right. Reads and
    # writes (idempotent) get every combination, including a policy changed on restart.
    read = st.sampled_from((Policy.SAFE, Policy.NEVER))  # the reference vocabulary the model knows
    write = st.sampled_from((Policy.NEVER, Policy.SAFE))
    plan = Plan(turns=turns, read_policy=draw(read), read_restart_policy=draw(read),
                write_policy=draw(write), write_restart_policy=draw(write),
                faults=tuple(faults), interrupt=interrupt)
    # Drawn last, and shrinking toward unique ids: a failure that needs reused ids says so.
    return dataclasses.replace(plan, call_ids=draw(st.sampled_from(CallIds)))


def _fault(k: int) -> str:
    # One draw in four tears the write instead of killing at an event.
    return TORN.name if k == 3 else KILL.name


def _kill(k: int) -> str:
    return KILL.name


def draws(torn: bool = True) -> st.SearchStrategy[tuple[Draw, ...]]:
    """`torn`: whether the agent's adapter can tear a write (else every draw is a kill)."""
    # Half the draws stay among the first few events of the ordered trace (the effects).
    index = st.integers(0, NEAR) | st.integers(0, MAX_INDEX)
    step = st.builds(Draw, index, st.integers(0, 3).map(_fault if torn else _kill))
    return st.lists(step, min_size=1, max_size=MAX_CRASHES).map(tuple)


def examples(interrupts: bool = True,
             torn: bool = True) -> st.SearchStrategy[tuple[Variant, tuple[Draw, ...]]]:
    """Plans and crash draws an agent can be given: none that needs a capability it lacks."""
    generated: st.SearchStrategy[Variant] = plans(interrupts).map(Generated)
    return st.tuples(generated, draws(torn))


def given_examples(scenarios: list[Scenario],
                   torn: bool = True) -> st.SearchStrategy[tuple[Variant, tuple[Draw, ...]]]:
    """The user's own scenarios, each as written, with crash draws: shrinks toward the first
    scenario and one crash at its first effect."""
    given: st.SearchStrategy[Variant] = st.sampled_from([Given(s.name, s) for s in scenarios])
    return st.tuples(given, draws(torn))
