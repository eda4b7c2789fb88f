"""Known failures (issue 34, item 2): a baseline from results, read back, and a run judged against it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crashmatrix.harness.records.baseline import (
    Baseline,
    BaselineError,
    judge,
    lines,
    of_results,
    read,
    write,
)
from crashmatrix.harness.records.results import CaseResult, Verdict


def _r(case: str, verdict: Verdict, *invariants: str) -> CaseResult:
    return CaseResult(case=case, scenario=case.split("/", 1)[0], depth=1, verdict=verdict, agent="x",
                      violations=[{"invariant": i, "message": "m"} for i in invariants], repro="r")


RESULTS = [_r("s/none", Verdict.PASS), _r("s/01:a:b/kill", Verdict.FAIL, "at-most-once", "scenario-oracle"),
           _r("s/02:a:b/kill", Verdict.NONDETERMINISTIC), _r("s/03:a:b/kill", Verdict.ERROR)]


def test_a_baseline_lists_what_did_not_hold_but_never_a_harness_error(tmp_path: Path) -> None:
    known = of_results(RESULTS)
    assert known.cases == {"s/01:a:b/kill": ("at-most-once", "scenario-oracle"),
                           "s/02:a:b/kill": ("nondeterministic",)}
    assert known.agent == "x"
    write(tmp_path / "b.json", known)
    assert read(tmp_path / "b.json") == known


def test_only_new_failures_and_cases_that_hold_again_fail_the_run() -> None:
    known = Baseline({"s/01:a:b/kill": ("at-most-once",), "s/05:a:b/kill": ("pairing",)})
    now = [*RESULTS[:2], _r("s/04:a:b/kill", Verdict.FAIL, "pairing"), _r("s/05:a:b/kill", Verdict.PASS)]
    j = judge(now, known)
    assert [r.case for r in j.expected] == ["s/01:a:b/kill"]
    assert [r.case for r in j.new] == ["s/04:a:b/kill"]
    assert j.fixed == ["s/05:a:b/kill"]
    assert j.changed == {"s/01:a:b/kill": (("at-most-once",), ("at-most-once", "scenario-oracle"))}
    assert not j.ok
    said = "\n".join(lines(j, Path("b.json")))
    assert "new failure: s/04:a:b/kill [pairing]" in said
    assert "now holds (XPASS, strict): s/05:a:b/kill: remove it from b.json" in said
    assert judge(RESULTS[:2], known).ok
    # A harness error is no verdict about the agent: listed or not, it is never "expected".
    errored = judge([RESULTS[3]], Baseline({"s/03:a:b/kill": ("error",)}))
    assert [r.case for r in errored.new] == ["s/03:a:b/kill"]


@pytest.mark.parametrize(("content", "expected"), [
    (None, "no such baseline file"),
    ("not json", "not a baseline file"),
    (json.dumps({"cases": {}}), '"format": 1'),
    (json.dumps({"format": 1, "cases": {"a": "pairing"}}), "field 'cases' must map case ids"),
    (json.dumps({"format": 1, "cases": {}, "agent": 3}), "field 'agent' must be a string"),
])
def test_a_bad_baseline_file_is_named_with_what_is_wrong(tmp_path: Path, content: str | None,
                                                          expected: str) -> None:
    path = tmp_path / "b.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError, match=str(path)) as caught:
        read(path)
    assert expected in str(caught.value)
