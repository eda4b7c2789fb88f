"""Repro files: a failing case with its whole scenario as data, self-contained, and their replay.

A repro file is JSON: `format`, `version`, the `case` id, the `agent` (and `mutant`, or null)
it failed on, and the `scenario` in the scenario file format (every field spelled out), plus
what was found, for people (`found`, `description`, `seed`). It needs nothing else to replay:
`crashmatrix repro --file PATH`.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.execution.runner import CaseRunner, RunnerConfig
from crashmatrix.harness.explore.scenario_data import scenario_data
from crashmatrix.harness.explore.trial import Finding
from crashmatrix.harness.records.case import Case, CaseIdError
from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.results import CaseResult
from crashmatrix.scenarios.errors import ScenarioError
from crashmatrix.scenarios.model import Scenario
from crashmatrix.scenarios.schema import parse_scenario

FORMAT = "crashmatrix-repro"
VERSION = 1
REQUIRED = ("format", "version", "case", "agent", "mutant", "scenario")
INFORMATIONAL = ("found", "description", "seed")
# A user's scenario with a check hook (`expect.check = "module:function"`) finds that module beside
# its own file: the repro file names the file (absolute, as this machine found it), and a replay
# reads the hook from there when it still exists.
SCENARIO_FILE = "scenario_file"


class ReproFileError(ScenarioError):
    """A repro file that cannot be replayed; like a scenario error, it names the file and field."""


@dataclass(frozen=True)
class Repro:
    scenario: Scenario
    case: Case
    agent: str
    mutant: str | None


def repro_command(path: str | Path) -> str:
    return f"crashmatrix repro --file {shlex.quote(str(path))}"


def repro_data(finding: Finding, agent: str, mutant: str | None, seed: int) -> dict[str, Any]:
    r = finding.result
    return {
        "format": FORMAT,
        "version": VERSION,
        "case": finding.case.case_id,
        "agent": agent,
        "mutant": mutant,
        "found": {"verdict": r.verdict.value, "invariants": r.invariants,
                  "violations": r.violations, "note": r.note, "calls": finding.calls,
                  "crashes": finding.crashes},
        "description": finding.variant.describe(),
        "seed": seed,
        "scenario": scenario_data(finding.scenario),
        **({SCENARIO_FILE: str(Path(finding.scenario.source).resolve())}
           if finding.scenario.expect.check is not None else {}),
    }


def write_repro(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _field(source: str, data: dict[str, Any], name: str, kinds: tuple[type, ...], what: str) -> Any:
    value = data[name]
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ReproFileError(f"expected {what}, got {value!r}", path=source, field=name)
    return value


def _document(path: Path) -> dict[str, Any]:
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ReproFileError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=source) from None
    except OSError as exc:
        raise ReproFileError(f"cannot read: {exc.strerror or exc}", path=source) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReproFileError(f"invalid JSON: {exc.msg}", path=source, line=exc.lineno,
                             column=exc.colno) from None
    if not isinstance(data, dict):
        raise ReproFileError("expected a JSON object (a crashmatrix repro file)", path=source)
    return data


def read_repro(path: str | Path) -> Repro:
    """Read and validate a repro file; a ReproFileError names the file and the field."""
    p = Path(path)
    source = str(p)
    data = _document(p)
    for name in data:
        if name not in (*REQUIRED, *INFORMATIONAL, SCENARIO_FILE):
            raise ReproFileError(f"unknown field; expected one of "
                                 f"{', '.join((*REQUIRED, *INFORMATIONAL, SCENARIO_FILE))}",
                                 path=source, field=name)
    for name in REQUIRED:
        if name not in data:
            raise ReproFileError("missing required field", path=source, field=name)
    if data["format"] != FORMAT:
        raise ReproFileError(f"expected {FORMAT!r}, got {data['format']!r}: not a crashmatrix "
                             "repro file", path=source, field="format")
    version = _field(source, data, "version", (int,), "an integer")
    if version != VERSION:
        raise ReproFileError(f"version {version} is not supported; this crashmatrix reads version "
                             f"{VERSION}", path=source, field="version")
    case_id = _field(source, data, "case", (str,), "a case id string")
    agent = _field(source, data, "agent", (str,), "an agent name")
    mutant = data["mutant"]
    if mutant is not None and (not isinstance(mutant, str) or not mutant):
        raise ReproFileError(f"expected a mutant name or null, got {mutant!r}", path=source,
                             field="mutant")
    beside = data.get(SCENARIO_FILE)
    origin = beside if isinstance(beside, str) and Path(beside).is_file() else source
    try:
        scenario = parse_scenario(data["scenario"], source=origin,
                                  default_name="explore")
    except ScenarioError as exc:
        field = "scenario" + (f".{exc.field}" if exc.field else "")
        raise ReproFileError(exc.message, path=source, field=field) from None
    try:
        case = Case.parse(case_id)
    except CaseIdError as exc:
        raise ReproFileError(str(exc), path=source, field="case") from None
    if case.scenario != scenario.name:
        raise ReproFileError(f"case {case_id!r} is of scenario {case.scenario!r}, but the file "
                             f"holds scenario {scenario.name!r}", path=source, field="case")
    return Repro(scenario, case, agent, mutant)


def load_repro_file(path: str | Path) -> tuple[Scenario, Case]:
    """The scenario and the case a repro file holds (raises ReproFileError for a bad file)."""
    repro = read_repro(path)
    return repro.scenario, repro.case


def run_repro(repro: Repro, config: RunnerConfig) -> tuple[Observation, CaseResult]:
    """Replay the case once and judge it (the agent is the one `config` runs)."""
    started = time.monotonic()
    obs = CaseRunner(config).run(repro.case, repro.scenario)
    result = evaluate(obs, repro.scenario, fsync=config.fsync, agent=config.agent,
                      scenario_dirs=[], duration_ms=(time.monotonic() - started) * 1000)
    return obs, result
