"""Explore's pure pieces: crash-point mapping, scenario data, repro files, the report, usage errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from crashmatrix.harness.cli.explore import CI_EXAMPLES, DEFAULT_EXAMPLES, explore, search_config
from crashmatrix.harness.explore import ReproFileError, load_repro_file, read_repro, repro_command
from crashmatrix.harness.explore.build import build_scenario
from crashmatrix.harness.explore.plan import Action, ActionKind, Care, Interrupt, InterruptKind, Plan
from crashmatrix.harness.explore.report import describe_finding
from crashmatrix.harness.explore.repro import repro_data, write_repro
from crashmatrix.harness.explore.scenario_data import scenario_data
from crashmatrix.harness.explore.schedule import Draw, ordered, pick_step
from crashmatrix.harness.explore.trial import Finding
from crashmatrix.harness.explore.variants import Generated, Given
from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.violation import InvariantId
from crashmatrix.harness.verify import verify
from crashmatrix.scenarios import load_builtin, load_file
from crashmatrix.scenarios.model import Scenario
from crashmatrix.scenarios.schema import parse_scenario
from tests.support.framework_case import refund_case

TRACE = ["recovery.branch:nothing.no_open_run", "commit.before:run_started.prompt,message.user",
         "commit.written:run_started.prompt,message.user", "provider.before:chat",
         "effect.before:append_note", "effect.after:append_note",
         "commit.written:message.tool.append_note"]


def test_crash_draws_name_effects_first_then_commits() -> None:
    assert [n for n, _ in ordered(TRACE)] == [6, 5, 3, 7, 2, 4, 1]
    assert pick_step(TRACE, Draw(0)) == CrashStep(6, "effect.after", "append_note")
    assert pick_step(TRACE, Draw(7)) == pick_step(TRACE, Draw(0)), "indices wrap around"
    torn = pick_step(TRACE, Draw(1, "torn"))
    assert torn == CrashStep(7, "commit.written", "message.tool.append_note", "torn")
    assert pick_step(["inbox.poll:inbox"], Draw(0, "torn")) == CrashStep(
        1, "inbox.poll", "inbox", "kill"), "no commit to tear: a kill instead"
    assert pick_step([], Draw(3)) is None


@pytest.mark.parametrize("name", sorted(load_builtin()))
def test_scenario_data_reads_back_equal(name: str) -> None:
    scenario = load_builtin()[name]
    back = parse_scenario(json.loads(json.dumps(scenario_data(scenario))), source=scenario.source,
                          default_name="unused")
    assert back == scenario


SUPPORT_SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "support_app" / "scenarios"


@pytest.mark.parametrize("name", sorted(p.stem for p in SUPPORT_SCENARIOS.glob("*.toml")))
def test_a_users_scenario_reads_back_equal_its_oracles_included(name: str) -> None:
    """What explore writes into a repro file for a user's own scenario: its records and patterns
    rules (the oracle of their tools' effects) included, or the replay judges another scenario."""
    scenario = load_file(SUPPORT_SCENARIOS / f"{name}.toml")
    assert scenario.expect.records or scenario.expect.patterns or scenario.services, "it names its effects"
    back = parse_scenario(json.loads(json.dumps(scenario_data(scenario))), source=scenario.source,
                          default_name="unused")
    assert back == scenario


def _finding() -> Finding:
    plan = Plan(((Action(ActionKind.APPEND, 0, Care.CHECK), Action(ActionKind.READ, 1)),),
                interrupt=Interrupt(InterruptKind.INPUT, "effect.after:read"))
    scenario = build_scenario(plan)
    case = Case(scenario.name, (CrashStep(15, "effect.after", "append_note"),
                                CrashStep(3, "commit.written", "message.tool.read", "torn")))
    violation = {"invariant": "at-most-once", "message": "call call_0 took effect 2 times",
                 "evidence": {}}
    result = CaseResult(case=case.case_id, scenario=scenario.name, depth=2, verdict=Verdict.FAIL,
                        violations=[violation])
    return Finding(Generated(plan), scenario, case, result)


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_repro_file_holds_everything_needed_to_replay(tmp_path: Path) -> None:
    finding = _finding()
    path = write_repro(tmp_path / "out" / "r.json", repro_data(finding, "durable-agent", None, 7))
    scenario, case = load_repro_file(path)
    assert case == finding.case
    assert scenario == msgspec.structs.replace(finding.scenario, source=str(path))
    repro = read_repro(path)
    assert (repro.agent, repro.mutant) == ("durable-agent", None)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["found"]["invariants"] == ["at-most-once"]
    assert data["seed"] == 7
    assert repro_command(path) == f"crashmatrix repro --file {path}"


@pytest.mark.parametrize(("change", "field", "says"), [
    (lambda d: d.pop("case"), "case", "missing required field"),
    (lambda d: d.update(version=2), "version", "version 2 is not supported"),
    (lambda d: d.update(format="other"), "format", "not a crashmatrix repro file"),
    (lambda d: d.update(case="nope"), "case", "bad case id"),
    (lambda d: d.update(case="y/none"), "case", "is of scenario 'y'"),
    (lambda d: d.update(mutant=3), "mutant", "expected a mutant name or null"),
    (lambda d: d.update(extra=1), "extra", "unknown field"),
    (lambda d: d["scenario"]["script"][0]["reply"].update(tool_calls=[]),
     "scenario.script[0].reply.tool_calls", "expected at least one tool call"),
])
def test_a_bad_repro_file_is_refused_naming_the_file_and_field(
        tmp_path: Path, change: Any, field: str, says: str) -> None:
    data = repro_data(_finding(), "durable-agent", None, 7)
    change(data)
    path = _write(tmp_path / "bad.json", data)
    with pytest.raises(ReproFileError) as info:
        load_repro_file(path)
    assert info.value.path == str(path)
    assert info.value.field == field
    assert says in str(info.value)
    assert str(path) in str(info.value)


def test_a_repro_file_that_is_not_json_says_where(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"format": \n', encoding="utf-8")
    with pytest.raises(ReproFileError, match=r"bad\.json:2:1: invalid JSON"):
        load_repro_file(path)
    with pytest.raises(ReproFileError, match="cannot read"):
        load_repro_file(tmp_path / "missing.json")


def test_the_report_shows_calls_crashes_and_violations() -> None:
    text = "\n".join(describe_finding(_finding()))
    assert "minimal case: x-" in text
    assert "2 tool calls in 1 turn, and 1 more that an input asks for:" in text
    assert ("turn 1 (parallel): append_note n0.md 'note-0' (checks after an unknown outcome) "
            "+ read r1.txt") in text
    assert "2 crashes:" in text
    assert "incarnation 2 (recovery), event 3 commit.written:message.tool.read: torn" in text
    assert "at-most-once: call call_0 took effect 2 times" in text


@pytest.mark.parametrize(("args", "says"), [
    (["--agent", "nope"], "unknown agent 'nope'"),
    (["--mutant", "nope"], "mutant 'nope'"),  # unknown, or no mutants at all
    (["--agent", "durable-agent", "--mutant", "rerun-never"], "exclusive"),
    (["--jobs", "3"], "Invalid value for '--jobs'"),
])
def test_usage_errors_exit_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(explore, args)
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_ci_runs_derandomized_with_a_small_budget_unless_told_otherwise() -> None:
    ci = search_config(None, None, 1, 60.0, {"CI": "true"})
    assert (ci.examples, ci.seed, ci.ci) == (CI_EXAMPLES, 0, True)
    assert search_config(None, None, 1, 60.0, {"CI": "true"}) == ci, "same seed every CI run"
    longer = search_config(500, 9, 2, 60.0, {"CI": "true"})
    assert (longer.examples, longer.seed, longer.jobs) == (500, 9, 2)
    local = search_config(None, None, 1, 60.0, {})
    assert (local.examples, local.ci) == (DEFAULT_EXAMPLES, False)


def test_a_users_scenario_with_a_check_hook_replays_its_hook_from_beside_its_file(tmp_path: Path) -> None:
    """The hook module lives beside the user's scenario file, not beside the repro file: the
    repro file names the scenario's file, and the replay's verifier finds the hook there."""
    from tests.unit.test_verifier_your_tools import _hooked  # noqa: PLC0415 - its hook and scenario

    (tmp_path / "theirs").mkdir()
    scenario = _hooked(tmp_path / "theirs", "support_checks:check")
    assert isinstance(scenario, Scenario)
    case = Case(scenario.name)
    result = CaseResult(case=case.case_id, scenario=scenario.name, depth=0, verdict=Verdict.FAIL)
    finding = Finding(Given(scenario.name, scenario), scenario, case, result)
    elsewhere = tmp_path / "out" / "r.json"
    elsewhere.parent.mkdir()
    repro = read_repro(write_repro(elsewhere, repro_data(finding, "durable-agent", None, 0)))
    assert repro.scenario.source == str(tmp_path / "theirs" / "refund.toml")
    said = [v.message for v in verify(refund_case(emails_sent=2, records=2), repro.scenario)
            if v.invariant is InvariantId.SCENARIO_ORACLE]
    assert said == ["support_checks:check: expected one email in outbox.jsonl, found 2"]
    # Without the scenario's file (a repro file carried to another machine) the hook cannot be
    # found: the file is refused, naming the field, rather than replayed without its oracle.
    (tmp_path / "theirs" / "refund.toml").unlink()
    with pytest.raises(ReproFileError, match=r"field 'scenario\.expect\.check': cannot load the check hook"):
        read_repro(elsewhere)
