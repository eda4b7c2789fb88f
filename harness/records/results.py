"""Case results: one JSON record per case, appended to results.jsonl as cases finish."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"  # an invariant was violated
    NONDETERMINISTIC = "nondeterministic"  # the crash point was not the recorded event
    ERROR = "error"  # the harness itself failed on this case


RESULTS_FILE = "results.jsonl"
# The agent a run tests unless told otherwise (an adapter registered under this name).
DEFAULT_AGENT = "durable-agent"


class ResultsError(Exception):
    """A results file is missing, empty or damaged; names the file and line."""


@dataclass
class CaseResult:
    case: str
    scenario: str
    depth: int
    verdict: Verdict
    violations: list[dict[str, Any]] = field(default_factory=list)
    branches: list[str] = field(default_factory=list)
    trace: list[list[str]] = field(default_factory=list)  # kind:label per event, per incarnation
    crashed_at: list[int | None] = field(default_factory=list)
    exit_codes: list[int | None] = field(default_factory=list)
    requests: int = 0
    commits: int = 0
    duration_ms: float = 0.0
    incarnation_ms: list[float] = field(default_factory=list)
    fsync: bool = False
    agent: str = DEFAULT_AGENT
    repro: str = ""
    note: str | None = None
    # Invariants that could not be judged for this agent, with why: {"invariant", "reason"}.
    not_applicable: list[dict[str, str]] = field(default_factory=list)

    @property
    def invariants(self) -> list[str]:
        return sorted({v["invariant"] for v in self.violations})

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.PASS

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = self.verdict.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseResult:
        known = {f for f in cls.__dataclass_fields__}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["verdict"] = Verdict(data["verdict"])
        return cls(**kwargs)


class ResultsWriter:
    """Appends results as they finish; each line is flushed so an interrupted run keeps them."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._f = path.open("w", encoding="utf-8")

    def write(self, result: CaseResult) -> None:
        self._f.write(json.dumps(result.to_json(), ensure_ascii=False, sort_keys=True) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()


def resolve_results_path(path: Path) -> Path:
    return path / RESULTS_FILE if path.is_dir() else path


def load(path: Path) -> list[CaseResult]:
    path = resolve_results_path(path)
    if not path.exists():
        raise ResultsError(f"{path}: no such results file")
    out: list[CaseResult] = []
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(CaseResult.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                raise ResultsError(f"{path}: line {line_no}: not a case result ({exc})") from None
    if not out:
        raise ResultsError(f"{path}: holds no case results")
    return out


def merge(groups: Iterable[list[CaseResult]]) -> list[CaseResult]:
    """Combine shard results; a case present twice must agree on its verdict."""
    by_case: dict[str, CaseResult] = {}
    for results in groups:
        for r in results:
            old = by_case.get(r.case)
            if old is not None and old.verdict != r.verdict:
                raise ResultsError(f"case {r.case} appears twice with different verdicts "
                                   f"({old.verdict.value}, {r.verdict.value})")
            by_case.setdefault(r.case, r)
    return sorted(by_case.values(), key=lambda r: (r.scenario, r.depth, r.case))


def summary(results: list[CaseResult], out: str | None = None) -> dict[str, Any]:
    """The `--json` summary object (documented in the README)."""
    scenarios: dict[str, dict[str, int]] = {}
    for r in results:
        s = scenarios.setdefault(r.scenario, {"cases": 0, "passed": 0, "failed": 0})
        s["cases"] += 1
        s["passed" if r.ok else "failed"] += 1
    failures = [{"case": r.case, "verdict": r.verdict.value, "invariants": r.invariants,
                 "repro": r.repro} for r in results if not r.ok]
    return {
        "cases": len(results),
        "passed": sum(1 for r in results if r.ok),
        "failed": sum(1 for r in results if not r.ok),
        "scenarios": scenarios,
        "failures": failures,
        "not_applicable": not_applicable(results),
        "out": out,
    }


def not_applicable(results: Iterable[CaseResult]) -> dict[str, str]:
    """Invariant -> why it was not judged, over all results (the same for every case of an agent)."""
    out: dict[str, str] = {}
    for r in results:
        for item in r.not_applicable:
            # An invariant judged in part says so first: its other verdicts are real ones.
            reason = (f"partly judged; not judged: {item['reason']}" if item.get("partly")
                      else item["reason"])
            out.setdefault(item["invariant"], reason)
    return dict(sorted(out.items()))
