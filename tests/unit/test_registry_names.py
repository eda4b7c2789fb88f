"""Naming an agent: a hosted app after its adapter's name, and declared exemptions checked."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from crashmatrix.harness.adapters.baseline import MessagesOnlyAdapter
from crashmatrix.harness.adapters.registry import AgentChoiceError, resolve_agent
from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId
from crashmatrix.harness.verify import judge
from tests.support.observations import changelog_scenario, late_intent_builder


class Exempt(MessagesOnlyAdapter):
    not_applicable = types.MappingProxyType({"intent-before-effect": "no intent record, by design"})


class Misspelt(MessagesOnlyAdapter):
    not_applicable = types.MappingProxyType({"intent-befor-effect": "typo"})


@pytest.fixture
def plugin_module() -> Iterator[str]:
    module = types.ModuleType("cm_test_adapters")
    module.EXEMPT = Exempt()  # type: ignore[attr-defined]
    module.MISSPELT = Misspelt()  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module.__name__
    del sys.modules[module.__name__]


def test_a_declared_exemption_must_name_an_invariant(plugin_module: str) -> None:
    assert resolve_agent(f"{plugin_module}:EXEMPT").name == "messages-only"
    with pytest.raises(AgentChoiceError, match="'intent-befor-effect', which name no invariant"):
        resolve_agent(f"{plugin_module}:MISSPELT")


def test_an_app_is_named_after_an_adapter_that_hosts_apps_only() -> None:
    with pytest.raises(AgentChoiceError, match="agent 'messages-only' hosts no app of yours"):
        resolve_agent("messages-only:mypkg.agent:build")
    with pytest.raises(AgentChoiceError, match="unknown mutant"):
        resolve_agent("mutant:nope")


def test_a_declared_exemption_is_not_judged_and_says_why() -> None:
    obs: Observation = late_intent_builder().build()
    before = judge(obs, changelog_scenario())
    assert InvariantId.INTENT_BEFORE_EFFECT in {v.invariant for v in before.violations}
    obs.declared_not_applicable = dict(Exempt.not_applicable)
    got = judge(obs, changelog_scenario())
    assert InvariantId.INTENT_BEFORE_EFFECT not in {v.invariant for v in got.violations}
    reasons = {n.invariant: n.reason for n in got.not_applicable}
    assert reasons[InvariantId.INTENT_BEFORE_EFFECT] == (
        "the agent's adapter declares: no intent record, by design")
