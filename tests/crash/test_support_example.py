"""The support example (examples/support_app) under the crash matrix: the verdicts match what its
outbox really holds, case by case, counted here from each kept case's workspace.

Each matrix here is a slice (`--case`): the cases around the read-only lookup and around the
send, where a framework re-runs or re-asks. The whole matrices are the commands of
examples/support_app/README.md, whose figures they gave; here they would cost a minute and a half of
every CI run."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.execution.runner import case_dir_name
from crashmatrix.harness.records.case import Case

pytestmark = pytest.mark.crash
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support_app"
ADDRESS, SUBJECT = "ana@example.com", "Your refund"


def kills(scenario: str, agent_events: dict[int, str]) -> list[str]:
    """`--case` options for the kill cases at these events (number: event) of a scenario."""
    return [a for n, event in sorted(agent_events.items())
            for a in ("--case", f"{scenario}/{n:02d}:{event}/kill")]


# The slices, by event number, of each framework's refund matrix (`crashmatrix list --cases`).
LANGGRAPH = {18: "effect.before:lookup_order", 19: "effect.after:lookup_order",
             20: "commit.before:writes.tools", 21: "commit.written:writes.tools",
             22: "commit.after:writes.tools", 33: "commit.after:checkpoint.loop",
             34: "effect.before:send_email", 35: "effect.after:send_email",
             36: "commit.before:writes.tools", 37: "commit.written:writes.tools",
             38: "commit.after:writes.tools"}
AGENTS_SDK = {6: "effect.before:lookup_order", 7: "effect.after:lookup_order",
              8: "commit.before:call.lookup_order,result.lookup_order",
              12: "provider.after:reply", 13: "effect.before:send_email",
              14: "effect.after:send_email", 15: "commit.before:call.send_email,result.send_email",
              16: "commit.written:call.send_email,result.send_email"}


def matrix(agent: str, out: Path, events: dict[int, str],
           *states: str) -> dict[str, tuple[dict[str, object], int | None]]:
    """Each case's result and the refund emails its outbox holds at the end (None: `--states`
    kept no tree of its own, as the case shared another's recovery)."""
    proc = subprocess.run([sys.executable, "-m", "crashmatrix", "run", "--agent", agent, "--scenarios",
                           "scenarios", "--scenario", "refund", "--keep", "--out", str(out),
                           *kills("refund", events), *states],
                          cwd=EXAMPLE, capture_output=True, text=True, timeout=900, check=False,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    found = {}
    assert "--case: a slice of the matrix" in proc.stderr
    for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        result = json.loads(line)
        ws = out / "cases" / case_dir_name(Case.parse(result["case"])) / "ws"
        outbox = ws / "outbox.jsonl"
        records = [json.loads(r) for r in outbox.read_text(encoding="utf-8").splitlines()] \
            if outbox.exists() else []
        found[result["case"]] = (result, None if states and not ws.exists() else sum(
            1 for r in records if r["to"] == ADDRESS and r["subject"] == SUBJECT))
    return found


def invariants(result: dict[str, object]) -> set[str]:
    violations = result["violations"]
    assert isinstance(violations, list)
    return {v["invariant"] for v in violations}


def reran_lookup(result: dict[str, object]) -> bool:
    """Whether an incarnation after the first ran lookup_order (a re-run after the crash)."""
    trace = result["trace"]
    assert isinstance(trace, list)
    return any("effect.before:lookup_order" in events for events in trace[1:])


def test_broken_langgraph_is_flagged_on_exactly_the_cases_that_sent_twice(tmp_path: Path) -> None:
    found = matrix("langgraph:support_lg.broken:build", tmp_path, LANGGRAPH)
    assert len(found) == len(LANGGRAPH) + 1  # and the recording
    twice = {case for case, (_, emails) in found.items() if emails == 2}
    flagged = {case for case, (result, _) in found.items() if "at-most-once" in invariants(result)}
    assert flagged == twice == {"refund/35:effect.after:send_email/kill",
                                "refund/36:commit.before:writes.tools/kill"}
    assert all(emails in (1, 2) for _, emails in found.values())
    # The two records differ (each email has its own sent_at and message_id), yet the report's diff
    # marks both as one effect's repeat: the verifier matched them by the fields the scenario counts.
    doubled = tmp_path / "cases" / case_dir_name(Case.parse("refund/35:effect.after:send_email/kill"))
    records = (doubled / "ws" / "outbox.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(records) == 2
    assert records[0] != records[1]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    case = page[page.index('data-case="refund/35:effect.after:send_email/kill"'):]
    case = case[case.index('<div class="file" data-path="outbox.jsonl">'):]
    case = case[:case.index("</pre>")]
    for n, record in enumerate(records, 1):
        assert f'<span class="d-add dup"><span class="ln">{n:>4}</span> + {html.escape(record)} ' \
               '<span class="dup-mark" title="one effect\'s record' in case, record
    # Its repro line, run as printed from the repository's root, shows the double send again.
    line = found["refund/35:effect.after:send_email/kill"][0]["repro"]
    assert isinstance(line, str)
    assert line.startswith("cd examples/support_app && crashmatrix repro ")
    command = line.replace("crashmatrix", f"{sys.executable} -m crashmatrix", 1)
    repro = subprocess.run(["/bin/sh", "-c", command], cwd=EXAMPLE.parents[1], capture_output=True,
                           text=True, timeout=300, check=False, stdin=subprocess.DEVNULL)
    assert repro.returncode == 1, repro.stderr[-2000:]
    assert "at-most-once: call call_1 (send_email) took effect 2 times" in repro.stdout
    # LangGraph re-ran the read-only lookup after some crashes: no violation for it.
    reran = [case for case, (result, _) in found.items() if reran_lookup(result)]
    assert reran, "no case re-ran lookup_order: the read-only check was not exercised"
    assert all(found[case][0]["verdict"] == "pass" for case in reran), reran


def test_fixed_langgraph_holds_on_every_case_with_one_email_each(tmp_path: Path) -> None:
    # From crash states (the adapter declares its state in the tree): each distinct state's
    # recovery runs once, and its tree, kept, is what every case with that state ends in.
    found = matrix("langgraph:support_lg.fixed:build", tmp_path, LANGGRAPH, "--states")
    assert len(found) == len(LANGGRAPH) + 1
    assert {case: r["verdict"] for case, (r, _) in found.items() if r["verdict"] != "pass"} == {}
    kept = [emails for _, emails in found.values() if emails is not None]
    assert len(kept) > 3
    assert set(kept) == {1}
    assert any(reran_lookup(r) for r, _ in found.values())


def test_the_agents_sdk_double_send_is_flagged_where_the_outbox_holds_two(tmp_path: Path) -> None:
    found = matrix("openai-agents:support_agents.broken:build", tmp_path, AGENTS_SDK)
    assert len(found) == len(AGENTS_SDK) + 1
    twice = {case for case, (_, emails) in found.items() if emails == 2}
    flagged = {case for case, (result, _) in found.items() if "at-most-once" in invariants(result)}
    assert flagged == twice
    assert twice == {"refund/14:effect.after:send_email/kill",
                     "refund/15:commit.before:call.send_email,result.send_email/kill"}
    fixed = matrix("openai-agents:support_agents.fixed:build", tmp_path / "fixed", AGENTS_SDK, "--states")
    assert {emails for _, emails in fixed.values() if emails is not None} == {1}
    assert not any("at-most-once" in invariants(r) for r, _ in fixed.values())


MAIL_FAULTS = ("error-after-apply", "error-before-apply", "kill-after-apply", "reply-lost", "timeout")


def downstream_verdicts(agent: str, out: Path, events: dict[int, str]) -> dict[str, set[str]]:
    """refund-api's failing cases and their invariants (a mail API keyed on the tool-call id): the
    kills at these events and every fault of the mail API's one request."""
    mail = [a for fault in MAIL_FAULTS for a in ("--case", f"refund-api/d01:create:mail/{fault}")]
    proc = subprocess.run([sys.executable, "-m", "crashmatrix", "run", "--agent", agent, "--scenarios",
                           "scenarios", "--scenario", "refund-api", "--json", "--out", str(out),
                           *kills("refund-api", events), *mail],
                          cwd=EXAMPLE, capture_output=True, text=True, timeout=900, check=False,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == len(events) + len(MAIL_FAULTS) + 1
    return {r["case"]: invariants(r) for r in results if r["verdict"] != "pass"}


def test_a_call_id_key_holds_where_the_framework_reruns_the_saved_call(tmp_path: Path) -> None:
    # LangGraph re-runs the tool call it saved, with its id: the mail API replays the first send.
    send = {n: e for n, e in LANGGRAPH.items() if n > 30}
    assert downstream_verdicts("langgraph:support_lg.api:build", tmp_path, send) == {}
    case = "refund-api/35:effect.after:send_email/kill"
    repro = subprocess.run([sys.executable, "-m", "crashmatrix", "repro", case, "--scenarios", "scenarios",
                            "--agent", "langgraph:support_lg.api:build"],
                           cwd=EXAMPLE, capture_output=True, text=True, timeout=300, check=False,
                           stdin=subprocess.DEVNULL)
    assert "#1 inc1 mail POST /messages key=call_1 -> 201 applied op_1" in repro.stdout, repro.stdout[-2000:]
    assert "#2 inc2 mail POST /messages key=call_1 -> 201 replayed op_1" in repro.stdout


def test_a_call_id_key_fails_where_the_framework_asks_the_model_again(tmp_path: Path) -> None:
    # The Agents SDK runs the request again; with fresh ids the model's new call brings a new key.
    failing = downstream_verdicts("openai-agents:support_agents.api:build", tmp_path,
                                  {n: e for n, e in AGENTS_SDK.items() if n > 10})
    doubled = {case for case, found in failing.items() if "at-most-once" in found}
    # Killed after the send returned (14, 15), or by the downstream after the mail API applied
    # it and before its reply arrived (d01): the model is asked again, a new call id, a new key.
    assert doubled == {"refund-api/14:effect.after:send_email/kill",
                       "refund-api/15:commit.before:call.send_email,result.send_email/kill",
                       "refund-api/d01:create:mail/kill-after-apply"}
    assert all("downstream-key" in failing[case] for case in doubled)
    assert {i for found in failing.values() for i in found} == {"at-most-once", "downstream-key",
                                                               "continuation"}
