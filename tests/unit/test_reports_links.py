"""The link to the line coverage pages: escaped for Markdown, relative to where the reports are
written, and only named (not linked) on the CI job page."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.records.run_record import LineCoverageRecord
from crashmatrix.reports import markdown
from crashmatrix.reports.write import ReportFile
from tests.unit.test_reports_command import finished_run, invoke, save
from tests.unit.test_reports_data import DECLARED, sample_results

COVERAGE = {"percent": 64.7, "html": "coverage/index.html", "recoveries": 90}


def test_a_path_with_markdown_in_it_is_a_code_span_linked_to_its_encoded_form() -> None:
    odd = LineCoverageRecord(64.7, "cov [x](y) `z`/index.html", 3)
    text = markdown.render(sample_results(), DECLARED, None, odd)
    assert "[``cov [x](y) `z`/index.html``](cov%20%5Bx%5D%28y%29%20%60z%60/index.html)" in text
    plain = markdown.render(sample_results(), DECLARED, None, LineCoverageRecord(1.0, "c/i.html", 1))
    assert "[`c/i.html`](c/i.html)" in plain


def test_the_step_summary_names_the_path_and_summary_md_links_it(tmp_path: Path) -> None:
    results = sample_results()
    save(results, tmp_path, {**finished_run(results), "line_coverage": COVERAGE})
    step = tmp_path / "step.md"
    assert invoke(str(tmp_path), env={"GITHUB_STEP_SUMMARY": str(step)}).exit_code == 0
    summary = (tmp_path / ReportFile.SUMMARY.value).read_text(encoding="utf-8")
    assert "[`coverage/index.html`](coverage/index.html)" in summary
    copy = step.read_text(encoding="utf-8")
    assert "`coverage/index.html` in the run's output folder" in copy
    assert "](coverage" not in copy, "a relative link on the job page leads nowhere"


def test_reports_written_elsewhere_link_back_to_the_results_folder(tmp_path: Path) -> None:
    results = sample_results()
    save(results, tmp_path / "saved", {**finished_run(results), "line_coverage": COVERAGE})
    assert invoke(str(tmp_path / "saved"), "--out", str(tmp_path / "other")).exit_code == 0
    summary = (tmp_path / "other" / ReportFile.SUMMARY.value).read_text(encoding="utf-8")
    assert "](../saved/coverage/index.html)" in summary
    page = (tmp_path / "other" / ReportFile.HTML.value).read_text(encoding="utf-8")
    assert 'href="../saved/coverage/index.html"' in page
    # Beside the results, as `run` writes them: the path as run.json has it.
    assert invoke(str(tmp_path / "saved")).exit_code == 0
    page = (tmp_path / "saved" / ReportFile.HTML.value).read_text(encoding="utf-8")
    assert 'href="coverage/index.html"' in page
