"""An effect is marked doubled on the timeline only when one call's effect really ran twice: call
ids are unique only within one model response, the result id a call reserves is unique."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from crashmatrix.agent import records as R
from crashmatrix.agent.log import SessionLog
from crashmatrix.agent.records import Intent, Replay, Role
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.reports import html
from tests.support.agent_env import make_agent, make_paths, recording
from tests.support.stub_provider import StubProvider, answer, call, changelog_script
from tests.unit.test_reports_data import DECLARED
from tests.unit.test_reports_html import doubled

MARK = re.compile(r"⚠ effect (\d)×")


def _effect(n: int, call_id: str, result: str | None, rerun: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"n": n, "point": "effect.after:append_note", "call": call_id}
    if result is not None:
        out["result"] = result
    if rerun:
        out["rerun"] = True
    return out


def _case(events: list[dict[str, Any]], violations: list[dict[str, Any]]) -> CaseResult:
    ev = {"incarnations": [{"index": 1, "command": "run", "policies": {}, "events": events,
                            "events_total": len(events), "exit_code": 0}],
          "requests": [], "store": {"read": False}, "files": []}
    return CaseResult("reused-call-ids/none", "reused-call-ids", 0, Verdict.FAIL, violations=violations,
                      repro="crashmatrix repro reused-call-ids/none", evidence=ev)


PAIRING = [{"invariant": "pairing", "message": "a result answers no call"}]


def test_one_call_id_in_three_responses_is_three_effects_not_one_tripled() -> None:
    # What `reused-call-ids/none` records: every response names its call `call_0`.
    events = [_effect(3, "call_0", "m3.0"), _effect(9, "call_0", "m7.0"), _effect(15, "call_0", "m11.0")]
    assert MARK.findall(html.render([_case(events, PAIRING)], DECLARED)) == []


def test_without_result_ids_a_reused_call_id_is_marked_only_when_at_most_once_says_so() -> None:
    events = [_effect(3, "call_0", None), _effect(9, "call_0", None)]
    assert MARK.findall(html.render([_case(events, PAIRING)], DECLARED)) == []
    violated = [{"invariant": "at-most-once", "message": "append_note took effect twice",
                 "evidence": {"call_ids": ["call_0"]}}]
    assert MARK.findall(html.render([_case(events, violated)], DECLARED)) == ["2", "2"]


def test_a_call_run_again_by_recovery_is_marked_on_both_lanes_it_ran_on() -> None:
    events = [_effect(3, "call_0", "m3.0"), _effect(9, "call_0", "m7.0"),
              _effect(12, "call_0", "m7.0", rerun=True)]
    page = html.render([_case(events, PAIRING)], DECLARED)
    assert MARK.findall(page) == ["2", "2"]
    assert '<li class="k-effect">03 effect.after:append_note call_0</li>' in page
    # Judged from a whole observation: the append run again by recovery, under its reserved id.
    assert MARK.findall(html.render([doubled()], DECLARED)) == ["2", "2"]


# --- the agent reports the id ---------------------------------------------------------------

def test_our_agent_reports_the_reserved_result_id_with_each_effect(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(changelog_script) as stub, recording() as rec, make_agent(paths, stub.url) as agent:
        agent.run_prompt("append and test")
    results = {e["tool_call_id"]: e["id"] for e in paths.entries() if e.get("role") == "tool"}
    effects = [(k, d) for k, _, d in rec.events if k.startswith("effect.")]
    assert len(effects) == 4
    assert all(d["result_id"] == results[d["call_id"]] for _, d in effects)
    assert len({d["result_id"] for _, d in effects}) == 2


def test_a_recovery_rerun_reports_the_id_the_call_reserved(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    paths.session.mkdir(parents=True)
    log = SessionLog(paths.session / "session.jsonl", fsync=False)
    log.open()
    log.commit([R.run_started("run-1", Intent.PROMPT), R.message("m1.0", "run-1", Role.USER, "task")])
    log.commit([R.message("m2.0", "run-1", Role.ASSISTANT, None,
                          tool_calls=[call("call_1", "read", path="CHANGELOG.md")])])
    log.commit([R.tool_started("run-1", "m2.0", "call_1", "read", {"path": "CHANGELOG.md"}, "m4.0",
                               Replay.SAFE)])
    log.close()
    with StubProvider(lambda m: answer("ok")) as stub, recording() as rec, \
            make_agent(paths, stub.url) as agent:
        agent.recover()
    effects = [d for k, _, d in rec.events if k.startswith("effect.")]
    assert effects
    assert all((d["result_id"], d["recovery"]) == ("m4.0", True) for d in effects)
