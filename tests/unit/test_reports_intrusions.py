"""Evidence and the report of a case with a second process (fault `second`), and workspace files
recorded the same from run to run."""

from __future__ import annotations

import dataclasses
import json

from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.evidence import DURATION, HOLDER_PID, MAX_FILE, SCRATCH, evidence
from crashmatrix.harness.records.observation import IncarnationRecord, Intrusion, Observation, Request
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.reports import html
from crashmatrix.reports.html_diff import render_file
from tests.support.observations import CHANGELOG, changelog_baseline
from tests.unit.test_reports_data import DECLARED

HOLDER = 2  # the baseline's recovery: frozen at its provider.before, before it sends request #1
FROZEN_AT = 7
PID = 4242
SCRATCH_DIR = "/dev/shm/crashmatrix-4242-ab12cd_9/case"
INTRUDER_SEQ = 4


def _intruder() -> IncarnationRecord:
    """A `recover` let in beside the holder: it asks the model once and commits once."""
    events = [ProbeEvent(1, "recovery.branch", "continue.after_user_message", {}),
              ProbeEvent(2, "inbox.poll", "inbox", {}),
              ProbeEvent(3, "provider.before", "chat", {"messages": 2}),
              ProbeEvent(4, "provider.after", "reply", {}),
              ProbeEvent(5, "commit.before", "message.assistant", {"seq": INTRUDER_SEQ}),
              ProbeEvent(6, "commit.written", "message.assistant", {"seq": INTRUDER_SEQ}),
              ProbeEvent(7, "commit.after", "message.assistant", {"seq": INTRUDER_SEQ})]
    return IncarnationRecord(HOLDER, "recover", {"read": "safe"}, events=events, exit_code=0,
                             requests_before=1, commits_before=3, intruder=True)


def intruded() -> Observation:
    """The baseline with a second process started while inc2 was frozen at its first request:
    the intruder's request is #1 in the provider's log, the holder's own follow it."""
    obs = changelog_baseline()
    holder = obs.incarnations[HOLDER - 1]
    assert holder.events[FROZEN_AT - 1].kind == "provider.before"
    holder.frozen_at = FROZEN_AT
    theirs = Request(1, [{"role": "user", "content": "intruder's question"}], 200,
                     reply={"role": "assistant", "content": "intruder's answer"}, rule="intruder")
    obs.requests = [obs.requests[0], theirs,
                    *(dataclasses.replace(r, index=r.index + 1) for r in obs.requests[1:])]
    for inc in obs.incarnations[HOLDER:]:
        inc.requests_before += 1
    obs.intrusions = [Intrusion(
        holder=HOLDER, holder_pid=PID, holder_command=f"agent --session {SCRATCH_DIR}/s recover",
        record=_intruder(), output=f"warning: pid {PID} holds {SCRATCH_DIR}/s; went on anyway\n",
        requests_after=2, session_before={"session.jsonl": "a"}, session_after={"session.jsonl": "ab"},
        workspace_before={CHANGELOG: "x"}, workspace_after={CHANGELOG: "xy"})]
    return obs


def test_the_intruders_requests_are_its_own_and_the_holders_keep_their_events() -> None:
    obs = intruded()
    ev = evidence(obs)
    by_index = {q["index"]: q for q in ev["requests"]}
    assert (by_index[1]["incarnation"], by_index[1].get("intruder"), by_index[1]["event"]) == (None, 1, 3)
    holder_sent = [e.n for e in obs.incarnations[HOLDER - 1].events if e.kind == "provider.before"]
    assert [(by_index[i]["incarnation"], by_index[i]["event"]) for i in (2, 3, 4)] == [
        (HOLDER, n) for n in holder_sent], "the holder's requests, each at its own provider.before"
    assert (by_index[0]["incarnation"], by_index[0]["event"]) == (1, 6)


def test_evidence_holds_the_intrusion_and_where_the_holder_was_frozen() -> None:
    ev = evidence(intruded())
    assert ev["incarnations"][HOLDER - 1]["frozen_at"] == FROZEN_AT
    assert ev["incarnations"][0]["frozen_at"] is None
    [x] = ev["intrusions"]
    assert (x["holder"], x["frozen_at"], x["command"], x["exit_code"], x["timed_out"]) == (
        HOLDER, FROZEN_AT, "recover", 0, False)
    assert [e["n"] for e in x["events"]] == list(range(1, 8))
    assert (x["requests"], x["commits"]) == ([1], [INTRUDER_SEQ])
    assert (x["session_changed"], x["workspace_changed"]) == (["session.jsonl"], [CHANGELOG])
    # Nothing that differs from run to run: the holder's pid and the scratch path are words.
    assert x["output"] == f"warning: pid {HOLDER_PID} holds {SCRATCH}/case/s; went on anyway\n"
    by_seq = {c["seq"]: c for c in ev["store"]["commits"]}
    assert (by_seq[INTRUDER_SEQ]["incarnation"], by_seq[INTRUDER_SEQ].get("intruder")) == (None, 1)
    assert by_seq[INTRUDER_SEQ + 1]["incarnation"] == HOLDER
    json.dumps(ev)  # plain JSON, as results.jsonl stores it


def _failed(obs: Observation) -> CaseResult:
    return CaseResult("changelog/07:provider.before:chat/second", "changelog", 1, Verdict.FAIL,
                      violations=[{"invariant": "one-writer", "message": "let in"}],
                      repro="crashmatrix repro x", evidence=evidence(obs))


def test_the_page_draws_the_intruder_lane_and_the_freeze_on_the_holders() -> None:
    page = html.render([_failed(intruded())], DECLARED)
    holder = page[page.index(f'data-incarnation="{HOLDER}"'):]
    lane = holder[:holder.index("</ol>")]
    assert "frozen (SIGSTOP) here" in lane
    assert lane.index("frozen (SIGSTOP) here") > lane.index(f"{FROZEN_AT:02d} provider.before:chat")
    assert "request #1:" not in lane, "the intruder's request is not drawn on the holder's lane"
    assert "request #2: HTTP 200" in lane
    assert (f"<b>second process</b> (recover; read=safe), started while incarnation {HOLDER} was "
            f"frozen at event {FROZEN_AT}: exit code 0") in page
    intruder = page[page.index('data-intruder="1"'):]
    assert "request #1: HTTP 200" in intruder[:intruder.index("</ol>")]
    assert "session files changed: <code>session.jsonl</code>" in intruder
    assert f"holds {SCRATCH}/case/s" in intruder
    assert "(second process 1, event 3)" in page, "the request names who sent it"


# --- workspace files, the same from run to run ----------------------------------------------

def test_file_texts_hold_no_durations_and_a_clip_is_a_flag_not_text() -> None:
    obs = changelog_baseline()
    obs.workspace_after = {**obs.workspace_after, "out.txt": "1 passed in 0.03s\n",
                           "big.txt": "line\n" * (MAX_FILE // 5 + 100)}
    files = {f["path"]: f for f in evidence(obs)["files"]}
    assert files["out.txt"]["after"] == f"1 passed in {DURATION}\n"
    big = files["big.txt"]
    assert len(big["after"]) == MAX_FILE
    assert big["truncated"] == {"after": 500}
    assert "more characters" not in big["after"]
    assert "truncated" not in files["out.txt"]


def test_the_diff_says_a_clip_in_a_note_not_in_a_line() -> None:
    shown = "".join(render_file("big.txt", None, "a\nb\n", {"after": 500}))
    assert shown.count('<span class="d-add">') == 2, "the file's two lines, and no third"
    assert '<p class="cut">after: the record keeps the first part of this file only, 500 more' in shown
