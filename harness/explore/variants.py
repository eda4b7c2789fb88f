"""What an example runs before its crashes: a plan generated for our tool vocabulary, or a scenario
of the user's own (their tools, their oracle). Both are `Variant`s; the search and the trial see
only that."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from crashmatrix.harness.explore.build import build_scenario
from crashmatrix.harness.explore.plan import Plan
from crashmatrix.scenarios.model import Scenario


class Variant(Protocol):
    """Hashable (the search memoises examples), and cheap to turn into its scenario."""

    def scenario(self) -> Scenario: ...

    def describe(self) -> list[str]: ...

    @property
    def calls(self) -> int:
        """The tool calls its script makes: a smaller variant is a simpler one."""
        ...


def _plural(n: int, word: str) -> str:
    return f"{n} {word if n == 1 else word + 's'}"


@dataclass(frozen=True)
class Generated:
    """A plan drawn by Hypothesis (strategies.plans), built into a scenario of our tools."""

    plan: Plan

    def scenario(self) -> Scenario:
        return build_scenario(self.plan)

    @property
    def calls(self) -> int:
        return len(self.plan.all_actions())

    def describe(self) -> list[str]:
        plan = self.plan
        extra = ", and 1 more that an input asks for" if plan.input_action() else ""
        return [f"{_plural(len(plan.actions()), 'tool call')} in {_plural(len(plan.turns), 'turn')}{extra}:",
                *(f"  {line}" for line in plan.describe())]


@dataclass(frozen=True)
class Given:
    """One of the scenarios the user named, as written: their tools, policies and expected end
    state; only the crash schedule is drawn. Equal by name (a Scenario holds mappings, so it is
    not hashable; names are unique in a scenario set)."""

    name: str
    given: Scenario = field(compare=False)

    def scenario(self) -> Scenario:
        return self.given

    @property
    def calls(self) -> int:
        return sum(len(rule.reply.tool_calls) for rule in self.given.script)

    def describe(self) -> list[str]:
        where = self.given.source
        return [f"scenario {self.name} ({where}), as written: {self.given.description}".rstrip(": ")]
