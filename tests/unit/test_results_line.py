"""A results line (msgspec, keys sorted) is the object json.dumps wrote; what msgspec cannot write
goes the old way; a settle run that broke the probe protocol is never kept for another case."""

from __future__ import annotations

import json

from crashmatrix.harness.execution.states import Settled
from crashmatrix.harness.records.observation import IncarnationRecord
from crashmatrix.harness.records.results import CaseResult, Verdict, _line


def test_a_line_is_the_object_json_dumps_wrote_whatever_its_keys() -> None:
    violation = {"invariant": "x", "message": "修复 é", "evidence": {"b": 1.5, "a": [None]}}
    result = CaseResult(case="a/01:k:l/kill", scenario="a", depth=1, verdict=Verdict.FAIL,
                        violations=[violation], trace=[["k:l"]], crashed_at=[1, None], duration_ms=12.5)
    old = json.dumps(result.to_json(), ensure_ascii=False, sort_keys=True)
    assert json.loads(_line(result)) == json.loads(old)
    assert "修复" in _line(result)  # UTF-8, not \\u escapes
    # Keys that are not text (evidence keyed by a number): msgspec refuses them, json.dumps writes.
    result.violations[0]["evidence"] = {9: "a", 10: "b"}
    assert json.loads(_line(result))["violations"][0]["evidence"] == {"9": "a", "10": "b"}


def test_a_settle_that_broke_the_protocol_stands_in_for_no_other() -> None:
    settled = Settled()
    broken = IncarnationRecord(index=3, command="recover", policies={}, exit_code=0)
    broken.protocol_error = "probe line 2 is not UTF-8 JSON"
    settled.keep("k", broken)
    assert not settled.reuse("k", IncarnationRecord(index=3, command="recover", policies={}))
    fine = IncarnationRecord(index=3, command="recover", policies={}, exit_code=0)
    settled.keep("k", fine)
    assert settled.reuse("k", IncarnationRecord(index=3, command="recover", policies={}))
