"""What every report opens with: the agent tested, the invariants judged and not, the faults, the
depth and the scenarios, so a reader knows what a "held" rests on before reading it. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crashmatrix.harness.records.results import CaseResult
from crashmatrix.harness.records.run_record import RunRecord
from crashmatrix.reports.facts import run_facts


@dataclass(frozen=True)
class Header:
    agent: str
    origin: str | None
    framework: str | None
    judged: tuple[str, ...]  # judged (at least in part), in the verifier's order
    not_judged: dict[str, str]  # invariant -> why (those judged only in part say so)
    faults: tuple[str, ...]
    depth: int
    scenarios: tuple[str, ...]

    def fields(self) -> list[tuple[str, str]]:
        """(label, text) pairs, in order; each renderer lays them out and escapes them its way."""
        agent = self.agent + (f" ({self.framework})" if self.framework else "")
        out = [("agent", agent)]
        if self.origin:
            out.append(("adapter", self.origin))
        out += [("judged", f"{len(self.judged)} invariants: {', '.join(self.judged) or 'none'}"),
                ("not judged", "; ".join(f"{i} ({why})" for i, why in self.not_judged.items()) or "none"),
                ("faults", ", ".join(self.faults) or "no crash"),
                ("depth", str(self.depth)),
                ("scenarios", ", ".join(self.scenarios))]
        return out


def header(results: Sequence[CaseResult], registry: Sequence[str], record: RunRecord | None) -> Header:
    """`registry`: every invariant the verifier runs, in its order (the CLI passes it in)."""
    facts = run_facts(results, registry, [], record.options.depth if record is not None else None, [])
    agents = sorted({r.agent for r in results})
    name = record.options.agent if record is not None and record.options.agent else ", ".join(agents)
    return Header(
        agent=name or "unknown",
        origin=record.agent_origin if record is not None else None,
        framework=record.agent_framework if record is not None else None,
        judged=tuple(i for i in registry if i in facts.invariants or i in facts.never_exercised),
        not_judged=facts.not_applicable, faults=facts.faults, depth=facts.depth,
        scenarios=tuple(dict.fromkeys(r.scenario for r in results)))
