"""report.html on hostile or huge results: every value escaped, only our script runs, and the drawn
timelines stay under a byte budget."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.run_record import LineCoverageRecord
from crashmatrix.reports import html
from tests.unit.test_reports_data import DECLARED, make, step

HOSTILE = "<script>x</script>"
IMG = '"><img src=x onerror=alert(1)>'


def _scripts(page: str) -> list[str]:
    return re.findall(r"<script\b[^>]*>(.*?)</script>", page, flags=re.S)


def _csp(page: str) -> str:
    found = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert found is not None
    return found.group(1)


def _hostile_evidence() -> dict[str, Any]:
    inc: dict[str, Any] = {"index": IMG, "command": HOSTILE, "policies": {HOSTILE: IMG},
                           "events": [{"n": HOSTILE, "point": HOSTILE, "call": IMG, "result": IMG},
                                      {"n": 2, "point": "effect.after:" + HOSTILE, "seq": HOSTILE}],
                           "events_total": HOSTILE, "runaway": HOSTILE, "crashed_at": IMG,
                           "exit_code": HOSTILE, "frozen_at": HOSTILE}
    ended = {**inc, "runaway": None, "crashed_at": None, "nondeterministic": None}
    return {"incarnations": [inc, {**ended, "index": 2}, {**ended, "index": 3, "crashed_at": IMG}],
            "intrusions": [{"holder": IMG, "frozen_at": HOSTILE, "command": HOSTILE, "events": [],
                            "events_total": IMG, "exit_code": HOSTILE, "runaway": IMG,
                            "output": HOSTILE, "requests": [IMG], "commits": [HOSTILE],
                            "session_changed": [IMG], "workspace_changed": [HOSTILE]}],
            "requests": [{"index": HOSTILE, "incarnation": IMG, "intruder": HOSTILE, "event": IMG,
                          "status": HOSTILE, "fault": IMG, "error_type": HOSTILE, "rule": IMG,
                          "messages": [{"role": IMG, "content": HOSTILE, "tool_call_id": IMG,
                                        "tool_calls": [{"id": IMG, "function": {"name": HOSTILE,
                                                                                "arguments": IMG}}]}],
                          "reply": HOSTILE},
                         {"index": 1, "status": 200, "messages": [], "shares": {"request": IMG,
                                                                               "messages": HOSTILE}}],
            "requests_total": HOSTILE,
            "deliveries": [{"kind": HOSTILE, "item_id": IMG, "text": HOSTILE, "incarnation": 2,
                            "event": 2}],
            "store": {"read": True, "commits": [{"seq": HOSTILE, "incarnation": IMG, "label": IMG,
                                                 "entries": [HOSTILE], "intruder": IMG}],
                      "commits_total": HOSTILE, "runs": [{"run_id": IMG, "intent": HOSTILE,
                                                          "outcome": IMG, "reason": HOSTILE}],
                      "integrity_error": HOSTILE, "torn_tail": IMG},
            "files": [{"path": IMG, "before": HOSTILE, "after": IMG, "truncated": {"after": HOSTILE}}],
            "files_total": HOSTILE}


def test_hostile_values_in_results_are_escaped_everywhere() -> None:
    case = Case("changelog", (step(13),))
    trace_only = make(case, Verdict.FAIL, exit_codes=[HOSTILE, IMG, None], crashed_at=[13, IMG, None],
                      violations=[{"invariant": HOSTILE, "message": IMG, "evidence": {"x": HOSTILE}}])
    with_evidence = make(Case("changelog", (step(12),)), Verdict.FAIL, evidence=_hostile_evidence(),
                         violations=[{"invariant": "at-most-once", "message": IMG,
                                      "evidence": {"events": [HOSTILE], "call_ids": [IMG]}}],
                         agent_output=[{"incarnation": 2, "tail": f"{HOSTILE}\n{IMG}"},
                                       {"incarnation": IMG, "tail": HOSTILE}, IMG])
    lines = LineCoverageRecord(percent=1.0, html=IMG, recoveries=HOSTILE)  # type: ignore[arg-type]
    page = html.render([trace_only, with_evidence], DECLARED, None, lines)
    assert len(_scripts(page)) == 1, "our script only"
    assert page.count("<script") == 1
    assert "<img" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page


def test_the_csp_allows_our_script_by_its_hash_and_nothing_else() -> None:
    page = html.render([make(Case("changelog"))], DECLARED)
    [script] = _scripts(page)
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    policy = dict(part.strip().split(" ", 1) for part in _csp(page).split(";"))
    assert policy["script-src"] == f"'sha256-{digest}'"
    assert "unsafe-inline" not in policy["script-src"]
    assert (policy["base-uri"], policy["form-action"], policy["default-src"]) == ("'none'",) * 3


# --- size -----------------------------------------------------------------------------------

REQUESTS = 30
CASES = 100
TEXT = 2000  # characters of each message a request adds


def _long_history(seed: int) -> dict[str, Any]:
    """A case whose 30 requests each add two long messages to one growing history."""
    requests = []
    for k in range(REQUESTS):
        own = [{"role": "assistant", "content": f"{seed}:{k}:a " + "a" * TEXT},
               {"role": "tool", "tool_call_id": f"call_{k}", "content": f"{seed}:{k}:t " + "t" * TEXT}]
        item: dict[str, Any] = {"index": k, "incarnation": 1, "event": 2 * k + 1, "status": 200,
                                "messages": own, "reply": {"role": "assistant", "content": "ok"}}
        if k:
            item["shares"] = {"request": k - 1, "messages": 2 * k}
        requests.append(item)
    return {"incarnations": [{"index": 1, "command": "run", "policies": {},
                              "events": [{"n": n, "point": "provider.before:chat"}
                                         for n in range(1, 2 * REQUESTS, 2)],
                              "events_total": 2 * REQUESTS, "exit_code": 1}],
            "requests": requests, "requests_total": REQUESTS, "store": {"read": False}, "files": []}


def _many() -> list[CaseResult]:
    out = []
    for i in range(CASES):
        case = Case(f"s{i:03d}", (step(13),))
        out.append(make(case, Verdict.FAIL, evidence=_long_history(i),
                        violations=[{"invariant": "liveness", "message": "exited 1"}]))
    return out


def test_a_request_shows_what_it_added_and_links_to_where_the_rest_is() -> None:
    page = html.render(_many()[:1], DECLARED)
    assert page.count("0:0:a ") == 1, "each message is on the page once"
    assert page.count(f"0:{REQUESTS - 1}:t ") == 1
    assert ('<p class="shared">messages 1–2: as in <a href="#t1-r0">request #0</a>; '
            'messages 3–4: as in <a href="#t1-r1">request #1</a>') in page


def test_the_drawn_timelines_stay_under_the_budget_and_the_rest_are_listed() -> None:
    results = _many()
    page = html.render(results, DECLARED)
    assert len(page.encode("utf-8")) < html.MAX_TIMELINE_BYTES + 512 * 1024
    drawn = page.count('<details class="case"')
    assert 0 < drawn < CASES
    said = re.search(r'<p id="over-budget">(\d+) failing case\(s\) not drawn', page)
    assert said is not None
    assert int(said.group(1)) == CASES - drawn
    for r in results:
        assert r.repro in page, "every failing case keeps its repro line"
