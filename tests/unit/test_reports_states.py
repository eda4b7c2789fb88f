"""run.json's `crash_states` (`run --states`): kept, read back, refused when damaged, and reported."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from crashmatrix.harness.cli.run import states_line, states_record
from crashmatrix.harness.execution.states_tally import Tally
from crashmatrix.harness.records.run_record import (
    RunFileError,
    RunRecord,
    ScenarioStates,
    StatesRecord,
    judge,
    read_run,
    write_run,
)
from crashmatrix.harness.verify import CHECKS
from crashmatrix.reports import html, markdown
from crashmatrix.reports.header import header
from crashmatrix.reports.write import ReportFile, write_reports
from tests.unit.test_reports_command import finished_run, invoke, save
from tests.unit.test_reports_data import DECLARED, sample_results

# Figures unlike each other, so a renderer that swapped two of them would be caught.
SHARED = StatesRecord(
    scenarios={"changelog-fast": ScenarioStates(points=46, states=22, second_process_points=13, hosts=1),
               "tiny <b>": ScenarioStates(points=7, states=3)},
    settles_reused=10)


def expected_lines(record: StatesRecord) -> dict[str, str]:
    """Per scenario, the figures as the reports must word them, built from the record's numbers."""
    out = {}
    for name, s in record.scenarios.items():
        text = f"{s.points} crash points from {s.states} distinct states"
        if s.hosts:
            text += (f"; {s.second_process_points} second-process points from {s.hosts} "
                     f"host{'' if s.hosts == 1 else 's'}")
        out[name] = text
    return out


def test_crash_states_survive_a_round_trip_and_older_files_have_none(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    record = RunRecord(declared_branches=("a",), crash_states=StatesRecord(
        scenarios=dict(SHARED.scenarios), settles_reused=SHARED.settles_reused, resumed=4))
    write_run(path, record)
    assert read_run(path) == record
    data = json.loads(path.read_text())
    assert data["crash_states"]["scenarios"]["changelog-fast"] == {
        "points": 46, "states": 22, "second_process_points": 13, "hosts": 1}
    assert (data["crash_states"]["settles_reused"], data["crash_states"]["resumed"]) == (10, 4)
    assert data["states"] is False  # the option keeps its own key
    assert "crash_states" not in RunRecord(declared_branches=()).to_json()
    data.pop("crash_states")  # what a run without --states, or an older crashmatrix, wrote
    path.write_text(json.dumps(data))
    old = read_run(path)
    assert old is not None
    assert old.crash_states is None


GOOD = {"points": 46, "states": 22, "second_process_points": 13, "hosts": 1}


@pytest.mark.parametrize(("crash_states", "message"), [
    ({"scenarios": {"changelog-fast": {**GOOD, "points": "46"}}, "settles_reused": 0, "resumed": 0},
     "crash_states.scenarios.changelog-fast.points must be a count"),
    ({"scenarios": {"changelog-fast": {**GOOD, "hosts": -1}}, "settles_reused": 0, "resumed": 0},
     "crash_states.scenarios.changelog-fast.hosts must be a count"),
    ({"scenarios": {"changelog-fast": {k: v for k, v in GOOD.items() if k != "states"}},
      "settles_reused": 0, "resumed": 0},
     "crash_states.scenarios.changelog-fast.states must be a count"),
    ({"scenarios": {"changelog-fast": [46, 22]}, "settles_reused": 0, "resumed": 0},
     "crash_states.scenarios.changelog-fast must be an object"),
    ({"scenarios": {"changelog-fast": GOOD}, "settles_reused": True, "resumed": 0},
     "crash_states.settles_reused must be a count"),
    ({"scenarios": {"changelog-fast": GOOD}, "settles_reused": 0},
     "crash_states.resumed must be a count"),
    ({"settles_reused": 0, "resumed": 0}, "crash_states.scenarios must be an object"),
    ([46, 22], "crash_states must be an object"),
])
def test_damaged_crash_states_are_refused_naming_the_file_and_field(
        tmp_path: Path, crash_states: object, message: str) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"declared_branches": [], "crash_states": crash_states}))
    with pytest.raises(RunFileError, match=f"^{path}: {message}$"):
        read_run(path)


def test_the_record_holds_the_tally_and_stderr_says_the_same() -> None:
    tally = Tally(points=Counter({"b": 9, "a": 5}), distinct=Counter({"b": 4, "a": 5}),
                  frozen=Counter({"b": 6}), hosts=Counter({"b": 2}))
    record = states_record(tally, settles_reused=3, resumed=2)
    assert record == StatesRecord(
        scenarios={"a": ScenarioStates(points=5, states=5),
                   "b": ScenarioStates(points=9, states=4, second_process_points=6, hosts=2)},
        settles_reused=3, resumed=2)
    assert states_line(record) == ("a 5 crash points -> 5 states; b 9 crash points -> 4 states, "
                                   "6 second-process points -> 2 hosts; 3 settle runs reused "
                                   "(a byte-identical final state settled before)")
    assert states_line(states_record(Tally())).startswith("no case started from a crash state; 0 settle")


def test_the_summary_shows_each_scenarios_figures() -> None:
    text = markdown.render(sample_results(), DECLARED, states=SHARED)
    section = text[text.index("## Crash states"):]
    for name, figures in expected_lines(SHARED).items():
        assert f"- `{name}`: {figures}\n" in section
    assert "second-process" not in section.split("`tiny <b>`")[1].split("\n")[0]  # it had no host
    assert f"- {SHARED.settles_reused} settle runs reused" in section
    assert "resumed" not in section
    assert "## Crash states" not in markdown.render(sample_results(), DECLARED)


def test_a_resumed_run_says_its_counts_leave_the_kept_cases_out() -> None:
    resumed = StatesRecord(scenarios=dict(SHARED.scenarios), settles_reused=0, resumed=17)
    assert "not the 17 kept from the run it resumed" in markdown.render(sample_results(), DECLARED,
                                                                        states=resumed)


def test_the_html_report_shows_each_scenarios_figures_escaped() -> None:
    page = html.render(sample_results(), DECLARED, states=SHARED)
    start = page.index('<div id="crash-states">')
    block = page[start:page.index("</div>", start)]
    assert "<li><code>tiny &lt;b&gt;</code>: " + expected_lines(SHARED)["tiny <b>"] + "</li>" in block
    assert "<li><code>changelog-fast</code>: " + expected_lines(SHARED)["changelog-fast"] + "</li>" in block
    assert f"<li>{SHARED.settles_reused} settle runs reused" in block
    assert 'id="crash-states"' not in html.render(sample_results(), DECLARED)


def test_write_reports_passes_the_record_to_every_markdown_and_html_copy(tmp_path: Path) -> None:
    step = tmp_path / "step.md"
    write_reports(sample_results(), tmp_path / "out", DECLARED, step, states=SHARED)
    figures = expected_lines(SHARED)["changelog-fast"]
    for path in (tmp_path / "out" / ReportFile.SUMMARY.value, tmp_path / "out" / ReportFile.HTML.value, step):
        assert figures in path.read_text(encoding="utf-8"), path


def test_report_regenerates_the_figures_run_wrote_from_run_json(tmp_path: Path) -> None:
    results = sample_results()
    run = finished_run(results)
    record = RunRecord.from_json(run, tmp_path / "run.json")
    write_reports(results, tmp_path / "run", DECLARED, states=SHARED, completeness=judge(record, results),
                  header=header(results, list(CHECKS), record))
    save(results, tmp_path / "saved", {**run, "crash_states": SHARED.to_json()})
    got = invoke(str(tmp_path / "saved"))
    assert got.exit_code == 0, got.output
    for name in (ReportFile.SUMMARY.value, ReportFile.HTML.value):
        text = (tmp_path / "saved" / name).read_text(encoding="utf-8")
        assert expected_lines(SHARED)["changelog-fast"] in text, name
        assert text == (tmp_path / "run" / name).read_text(encoding="utf-8"), name
