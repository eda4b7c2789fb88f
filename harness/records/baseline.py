"""Known failures: a baseline file lists the cases a project expects to fail (a framework's
behaviour it cannot change yet), each with the invariants it broke, so a matrix fails only on
what is new, and says when a listed case holds again (as pytest's XPASS(strict) does). Pure but
for reading and writing the file.

The file is JSON, written by `crashmatrix baseline`:

    {"format": 1, "agent": "langgraph", "cases": {"changelog/19:effect.after:append_note/kill":
     ["at-most-once", "scenario-oracle"]}}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from crashmatrix.harness.records.atomic import replace_file
from crashmatrix.harness.records.results import CaseResult, Verdict

FORMAT = 1


class BaselineError(Exception):
    """A baseline file that cannot be read: the message names the file and what is wrong."""


@dataclass(frozen=True)
class Baseline:
    cases: Mapping[str, tuple[str, ...]]  # case id -> the invariants it broke when recorded
    agent: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT, "agent": self.agent,
                "cases": {c: list(inv) for c, inv in sorted(self.cases.items())}}


def of_results(results: Iterable[CaseResult]) -> Baseline:
    """Every case that did not hold (violated, or nondeterministic, or a scenario error), with its
    invariants (or its verdict, when it broke none)."""
    failing = [r for r in results if r.verdict is not Verdict.PASS and r.verdict is not Verdict.ERROR]
    agents = {r.agent for r in failing}
    return Baseline({r.case: tuple(r.invariants) or (r.verdict.value,) for r in failing},
                    agents.pop() if len(agents) == 1 else None)


def write(path: Path, baseline: Baseline) -> None:
    replace_file(path, [json.dumps(baseline.to_json(), ensure_ascii=False, indent=1) + "\n"])


def read(path: Path) -> Baseline:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such baseline file (`crashmatrix baseline RESULTS --write "
                            f"{path}` writes one)") from None
    except (OSError, ValueError) as exc:
        raise BaselineError(f"{path}: not a baseline file ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BaselineError(f"{path}: not a baseline file (expected a JSON object with \"format\": {FORMAT})")
    cases = data.get("cases")
    if not isinstance(cases, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(i, str) for i in v)
            for k, v in cases.items()):
        raise BaselineError(f"{path}: field 'cases' must map case ids to lists of invariant ids")
    agent = data.get("agent")
    if agent is not None and not isinstance(agent, str):
        raise BaselineError(f"{path}: field 'agent' must be a string or null")
    return Baseline({k: tuple(v) for k, v in cases.items()}, agent)


@dataclass
class Judged:
    """A run's results against a baseline."""

    expected: list[CaseResult] = field(default_factory=list)  # listed, and failed again
    new: list[CaseResult] = field(default_factory=list)  # failed, not listed
    fixed: list[str] = field(default_factory=list)  # listed, and held now: to remove
    changed: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.new and not self.fixed


def judge(results: Iterable[CaseResult], baseline: Baseline) -> Judged:
    """Harness errors are never expected: they are no verdict about the agent."""
    out = Judged()
    for r in results:
        listed = baseline.cases.get(r.case)
        if r.verdict is Verdict.PASS:
            if listed is not None:
                out.fixed.append(r.case)
        elif listed is None or r.verdict is Verdict.ERROR:
            out.new.append(r)
        else:
            out.expected.append(r)
            now = tuple(r.invariants) or (r.verdict.value,)
            if set(now) != set(listed):
                out.changed[r.case] = (listed, now)
    return out


def lines(j: Judged, path: Path) -> list[str]:
    """What a run says of its baseline, one line each."""
    out = [f"baseline {path}: {len(j.expected)} known failure(s) failed again, {len(j.new)} new, "
           f"{len(j.fixed)} now hold"]
    out += [f"  new failure: {r.case} [{', '.join(r.invariants) or r.verdict.value}]" for r in j.new]
    out += [f"  now holds (XPASS, strict): {c}: remove it from {path}" for c in j.fixed]
    out += [f"  known failure broke other invariants: {c}: listed [{', '.join(a)}], now [{', '.join(b)}]"
            for c, (a, b) in j.changed.items()]
    return out
