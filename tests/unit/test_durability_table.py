"""The durability table's cells: which cases and violations answer which promise, and why a cell
is not judged. Pure: results in, cells out."""

from __future__ import annotations

from typing import Any

from crashmatrix.harness.adapters.interface import Capability
from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.reports.durability import RULES, Promise, Status, render_markdown, row

KILL_ONLY = frozenset({Capability.KILL.value, Capability.STORE.value})
ALL = frozenset(c.value for c in Capability)


def result(case: str, *violations: tuple[str, dict[str, Any]], verdict: Verdict | None = None,
           not_applicable: list[dict[str, str]] | None = None,
           exercised: list[str] | None = None) -> CaseResult:
    depth = 0 if case.endswith("/none") else case.count("+") + 1
    found = [{"invariant": i, "message": "m", "evidence": e} for i, e in violations]
    return CaseResult(case, case.split("/", maxsplit=1)[0], depth,
                      verdict or (Verdict.FAIL if found else Verdict.PASS), found,
                      repro=f"crashmatrix repro {case} --agent x",
                      not_applicable=not_applicable or [], exercised=exercised)


def cells(results: list[CaseResult], caps: frozenset[str] = ALL) -> dict[Promise, Any]:
    return {c.promise: c for c in row("x", None, results, caps).cells}


def test_a_doubled_effect_breaks_no_duplicate_at_its_first_case_by_what_the_case_is() -> None:
    found = cells([
        result("s/none"),
        result("s/12:effect.after:bash/kill", ("at-most-once", {})),
        result("s/09:effect.after:append_note/power", ("at-most-once", {}), ("durable-commits", {})),
        result("s/09:effect.after:append_note/kill", ("safe-rerun", {})),
    ])
    cell = found[Promise.NO_DUPLICATE]
    assert cell.status is Status.VIOLATED
    assert cell.first_case == "s/09:effect.after:append_note/kill"  # the kill, not the power case
    assert cell.repro == "crashmatrix repro s/09:effect.after:append_note/kill --agent x"
    # The power case answers its own column (for what a power loss loses), and only it.
    assert found[Promise.POWER_LOSS].first_case == "s/09:effect.after:append_note/power"
    doubled_only = cells([result("s/09:effect.after:append_note/power", ("at-most-once", {}))])
    assert doubled_only[Promise.POWER_LOSS].status is Status.HELD
    assert found[Promise.NOTHING_LOST].status is Status.HELD
    assert found[Promise.NOTHING_LOST].cases == 2  # crash cases only, the power case not there


def test_a_resent_task_and_an_invented_message_are_two_columns() -> None:
    resent = cells([result("s/03:commit.after:x/kill", ("continuation", {"task_count": 2}))])
    assert resent[Promise.NO_RESENT_TASK].status is Status.VIOLATED
    assert resent[Promise.NO_INVENTED].status is Status.HELD
    invented = cells([result("s/03:commit.after:x/kill", ("continuation", {"text": "continue"}))])
    assert invented[Promise.NO_INVENTED].status is Status.VIOLATED
    assert invented[Promise.NO_RESENT_TASK].status is Status.HELD


def test_a_promise_whose_fault_the_adapter_cannot_take_is_not_applicable_with_why() -> None:
    found = cells([result("s/none"), result("s/01:commit.before:x/kill")], KILL_ONLY)
    power, second = found[Promise.POWER_LOSS], found[Promise.SECOND_WRITER]
    assert power.status is Status.NOT_APPLICABLE
    assert "file-store" in (power.reason or "")
    assert second.status is Status.NOT_APPLICABLE
    assert "concurrent" in (second.reason or "")
    # Declared, but the fault was not selected: said so, differently.
    unselected = cells([result("s/01:commit.before:x/kill")], ALL)[Promise.POWER_LOSS]
    assert ("no case of power, power-blocks, power-keep1, power-names, power-subsets was run"
            in (unselected.reason or ""))


def test_invariants_the_agent_declares_not_applicable_make_the_promise_not_applicable() -> None:
    exempt = [{"invariant": "one-writer", "reason": "the framework holds no lock"}]
    found = cells([result("s/01:commit.before:x/second", not_applicable=exempt)])
    cell = found[Promise.SECOND_WRITER]
    assert cell.status is Status.NOT_APPLICABLE
    assert cell.reason == "one-writer: the framework holds no lock"


def test_cases_that_proved_nothing_make_a_cell_inconclusive_not_held() -> None:
    found = cells([result("s/01:commit.before:x/kill", verdict=Verdict.NONDETERMINISTIC)])
    assert found[Promise.NO_DUPLICATE].status is Status.INCONCLUSIVE
    assert found[Promise.NO_DUPLICATE].first_case == "s/01:commit.before:x/kill"


def test_the_page_escapes_what_an_adapter_brings_and_lists_every_column() -> None:
    profile = Profile("<b>fw</b>", "1|2", "a store", "restart")
    rw = row("evil|agent", profile, [result("s/01:commit.before:x/kill", ("at-most-once", {}))], KILL_ONLY)
    page = render_markdown([rw], "crashmatrix durability", ["s"])
    assert "<b>" not in page
    assert "&lt;b&gt;fw&lt;/b&gt;" in page
    assert "`evil\\|agent`" in page
    assert "1\\|2" in page
    header = next(line for line in page.splitlines() if line.startswith("| agent |"))
    assert all(r.promise.value in header for r in RULES)
    assert "crashmatrix repro s/01:commit.before:x/kill --agent x" in page


def test_without_a_crash_case_nothing_is_held() -> None:
    """A recording alone (its crash cases not run: it failed, or had no crash point) shows
    nothing about recovery; a scenario error proves nothing either."""
    only_recording = cells([result("s/none")])
    assert {c.status for c in only_recording.values()} <= {Status.INCONCLUSIVE, Status.NOT_APPLICABLE}
    assert "no crash case ran" in (only_recording[Promise.NO_DUPLICATE].reason or "")
    wrong = cells([result("s/01:commit.before:x/kill", verdict=Verdict.SCENARIO_ERROR)])
    assert wrong[Promise.NO_DUPLICATE].status is Status.INCONCLUSIVE


def test_a_promise_no_case_called_for_is_not_exercised_not_held() -> None:
    found = cells([result("s/01:commit.before:x/kill", exercised=["liveness", "pairing"])])
    assert found[Promise.PAIRED].status is Status.HELD
    vacuous = found[Promise.NO_DUPLICATE]
    assert vacuous.status is Status.NOT_EXERCISED
    assert "at-most-once" in (vacuous.reason or "")
