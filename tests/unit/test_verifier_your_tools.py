"""The verdict on a user's own tools: effects counted in the world, policies for any tool, and the
oracles for real records (JSON-lines fields, line patterns, a Python check hook)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest

from crashmatrix.harness.records.observation import DownstreamRequest
from crashmatrix.harness.records.violation import InvariantId
from crashmatrix.harness.verify import verify
from crashmatrix.scenarios import ScenarioError, load_file
from crashmatrix.scenarios.schema import parse_scenario
from tests.support.framework_case import (
    KEYED_MAIL,
    REFUND,
    UNKEYED_MAIL,
    mailed,
    outbox,
    refund_case,
    refund_scenario,
)

Id = InvariantId


def ids(obs_and_scenario: tuple[object, ...]) -> set[InvariantId]:
    obs, scenario = obs_and_scenario
    return {v.invariant for v in verify(obs, scenario)}  # type: ignore[arg-type]


def test_an_idempotent_tool_rerun_that_sent_once_holds() -> None:
    # The fixed send_email: run twice across a crash, one record in the outbox.
    assert ids((refund_case(emails_sent=2, records=1), refund_scenario())) == set()


def test_an_idempotent_tool_that_really_sent_twice_is_at_most_once() -> None:
    violations = verify(refund_case(emails_sent=2, records=2), refund_scenario())
    (v,) = [v for v in violations if v.invariant is Id.AT_MOST_ONCE]
    assert "call call_1 (send_email) took effect 2 times" in v.message
    assert v.evidence["judged_from"] == "world"
    assert v.evidence["file_lines"] == [1, 2]
    assert Id.SAFE_RERUN not in {v.invariant for v in violations}  # re-running it was allowed


def test_two_records_from_one_stored_call_are_flagged_even_when_the_probes_saw_one_run() -> None:
    # The Agents SDK case: the crashed run's call was never saved, so the store holds one call,
    # yet the world holds two emails. The world decides.
    assert Id.AT_MOST_ONCE in ids((refund_case(emails_sent=1, records=2), refund_scenario()))


def test_records_to_someone_else_are_not_charged_to_this_call() -> None:
    obs = refund_case(emails_sent=1, records=1)
    obs.workspace_after["outbox.jsonl"] += outbox(1, to="bob@example.com")
    assert ids((obs, refund_scenario())) == set()


def test_a_read_only_tool_rerun_is_no_violation_but_a_never_one_is() -> None:
    assert ids((refund_case(emails_sent=1, records=1, lookups=2), refund_scenario())) == set()
    never = {"lookup_order": "never", "send_email": "idempotent"}
    found = ids((refund_case(emails_sent=1, records=1, lookups=2, policies=never), refund_scenario()))
    assert {Id.SAFE_RERUN, Id.AT_MOST_ONCE} <= found


def test_a_never_tool_repeated_is_flagged_from_the_probes_even_when_the_world_shows_one() -> None:
    never = {"lookup_order": "read-only", "send_email": "never"}
    violations = verify(refund_case(emails_sent=2, records=1, policies=never), refund_scenario("never"))
    assert {Id.AT_MOST_ONCE, Id.SAFE_RERUN} <= {v.invariant for v in violations}


def test_an_idempotent_tool_no_oracle_shows_is_a_scenario_error(tmp_path: Path) -> None:
    # Only the world can tell whether a repeat took effect once: with nothing naming it, the
    # promise cannot be judged, and every repeat would fail.
    source = tmp_path / "refund.toml"
    source.write_text(REFUND % {"policy": "idempotent", "expect": ""}, encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_file(source)
    assert info.value.field == "tools.policies.send_email"
    assert "declared idempotent, but no expect.records or expect.patterns rule names it" in info.value.message


# -- oracles for real records -----------------------------------------------------------------

def test_the_json_record_oracle_fails_when_the_world_is_wrong_and_passes_when_right() -> None:
    scenario = refund_scenario()
    right = refund_case(emails_sent=1, records=1)
    assert ids((right, scenario)) == set()
    for wrong in ("", outbox(1, subject="Hello"), "not json\n", outbox(1, to=True)):
        obs = refund_case(emails_sent=1, records=0)
        obs.workspace_after["outbox.jsonl"] = wrong
        violations = [v for v in verify(obs, scenario) if v.invariant is Id.SCENARIO_ORACLE]
        assert len(violations) == 1, wrong
        assert "outbox.jsonl records with to='ana@example.com'" in violations[0].message
        assert "expects exactly 1" in violations[0].message


def test_a_record_field_is_reached_by_a_dotted_name_and_compared_as_json() -> None:
    expect = """
[[expect.records]]
path = "orders.jsonl"
where = { "customer.email" = "ana@example.com", paid = true }
count = 1
"""
    scenario = refund_scenario("never", expect=expect)
    rule = scenario.expect.records[0]
    text = ('{"customer": {"email": "ana@example.com"}, "paid": true}\n'
            '{"customer": {"email": "ana@example.com"}, "paid": 1}\n'
            '{"customer": "ana@example.com", "paid": true}\n')
    assert rule.matches(text) == [1]


def test_the_pattern_oracle_counts_matching_lines() -> None:
    expect = """
[[expect.patterns]]
path = "outbox.jsonl"
pattern = '"to": "ana@example\\.com"'
tool = "send_email"
max = 1
min = 1
"""
    scenario = refund_scenario(expect=expect)
    assert ids((refund_case(emails_sent=1, records=1), scenario)) == set()
    found = ids((refund_case(emails_sent=2, records=2), scenario))
    assert {Id.SCENARIO_ORACLE, Id.AT_MOST_ONCE} <= found


HOOK = '''
def check(workspace, transcript):
    lines = (workspace.get("outbox.jsonl") or "").splitlines()
    if len(lines) != 1:
        yield f"expected one email in outbox.jsonl, found {len(lines)}"
    if not any(m.role == "assistant" and not m.calls for m in transcript.messages):
        yield "no final answer"

def boom(workspace, transcript):
    raise RuntimeError("hook bug")

def exits(workspace, transcript):
    raise SystemExit(0)

def text(workspace, transcript):
    return "bad world"

def mutates(workspace, transcript):
    workspace["outbox.jsonl"] = ""
    return []

def prints(workspace, transcript):
    print("hello from the hook")
    return ["found something"]
'''


def _hooked(tmp_path: Path, ref: str) -> object:
    (tmp_path / "support_checks.py").write_text(HOOK, encoding="utf-8")
    source = tmp_path / "refund.toml"
    text = REFUND % {"policy": "never", "expect": f'[expect]\ncheck = "{ref}"'}
    source.write_text(text, encoding="utf-8")
    return load_file(source)


def test_the_check_hook_fails_when_the_world_is_wrong_and_passes_when_right(tmp_path: Path) -> None:
    scenario = _hooked(tmp_path, "support_checks:check")
    assert ids((refund_case(emails_sent=1, records=1), scenario)) == set()
    violations = verify(refund_case(emails_sent=2, records=2), scenario)  # type: ignore[arg-type]
    oracle = [v.message for v in violations if v.invariant is Id.SCENARIO_ORACLE]
    assert oracle == ["support_checks:check: expected one email in outbox.jsonl, found 2"]


def test_a_check_hook_that_raises_says_the_hook_failed(tmp_path: Path) -> None:
    scenario = _hooked(tmp_path, "support_checks:boom")
    (v,) = [v for v in verify(refund_case(emails_sent=1, records=1), scenario)  # type: ignore[arg-type]
            if v.invariant is Id.SCENARIO_ORACLE]
    assert "raised RuntimeError: hook bug" in v.message


@pytest.mark.parametrize(("expect", "field", "says"), [
    ('[expect]\ncheck = "support_checks:nope"', "expect.check", "has no attribute 'nope'"),
    ('[expect]\ncheck = "no_such_module_x:check"', "expect.check", "No module named 'no_such_module_x'"),
    ('[[expect.patterns]]\npath = "a"\npattern = "(unclosed"\ncount = 1', "expect.patterns[0].pattern",
     "not a regular expression"),
    ('[[expect.records]]\npath = "a"\ntool = "fax"\ncount = 1', "expect.records[0].tool",
     "tool 'fax' is not enabled"),
    ('[[expect.records]]\npath = "a"', "expect.records[0]", "expected 'count', or 'min'"),
    ('[[expect.records]]\npath = "a"\nwhere = { "a..b" = 1 }\ncount = 1', 'expect.records[0].where."a..b"',
     "is not a field name"),
    ('[[expect.records]]\npath = "a"\nwhere = { n = nan }\ncount = 1', "expect.records[0].where.n",
     "nan is not a JSON number"),
])
def test_a_wrong_oracle_is_a_scenario_error_naming_file_line_and_field(
        tmp_path: Path, expect: str, field: str, says: str) -> None:
    (tmp_path / "support_checks.py").write_text(HOOK, encoding="utf-8")
    source = tmp_path / "refund.toml"
    text = REFUND % {"policy": "never", "expect": expect}
    source.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_file(source)
    err = info.value
    assert err.field == field, err
    assert says in err.message, err
    assert err.path == str(source)
    assert err.line is not None
    assert text.splitlines()[err.line - 1].split("=")[0].strip("[] ").split(".")[-1] in field


def test_tomllib_round_trip_of_the_refund_scenario() -> None:
    # The shared text is valid TOML, so a failure above is the oracle's, not the fixture's.
    assert tomllib.loads(REFUND % {"policy": "never", "expect": ""})["tools"]["enabled"] == [
        "lookup_order", "send_email"]
    assert parse_scenario(tomllib.loads(REFUND % {"policy": "never", "expect": ""}), source="x",
                          default_name="x").tools.policies["send_email"].value == "never"


@pytest.mark.parametrize(("hook", "says"), [
    ("exits", "raised SystemExit: 0"),
    ("text", "returned str, not an iterable of messages"),
    ("mutates", "raised TypeError"),  # a read-only copy: the evidence shows the world
])
def test_a_hook_that_misbehaves_is_one_violation_and_never_ends_the_harness(
        tmp_path: Path, hook: str, says: str) -> None:
    scenario = _hooked(tmp_path, f"support_checks:{hook}")
    obs = refund_case(emails_sent=1, records=1)
    before = dict(obs.workspace_after)
    (v,) = [v for v in verify(obs, scenario) if v.invariant is Id.SCENARIO_ORACLE]  # type: ignore[arg-type]
    assert says in v.message
    assert obs.workspace_after == before


def test_what_a_hook_prints_stays_out_of_the_harness_output(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    scenario = _hooked(tmp_path, "support_checks:prints")
    violations = verify(refund_case(emails_sent=1, records=1), scenario)  # type: ignore[arg-type]
    assert [v.message for v in violations] == ["support_checks:prints: found something"]
    assert "hello from the hook" not in capsys.readouterr().out


def test_two_scenario_folders_each_get_their_own_checks_module(tmp_path: Path) -> None:
    # Same module name, different files: Python's module cache must not hand one the other's.
    scenarios = []
    for folder, verdict in (("a", "[]"), ("b", '["b says no"]')):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "checks.py").write_text(f"def check(w, t):\n    return {verdict}\n")
        source = tmp_path / folder / "s.toml"
        source.write_text(REFUND % {"policy": "never", "expect": '[expect]\ncheck = "checks:check"'},
                          encoding="utf-8")
        scenarios.append(load_file(source))
    obs = refund_case(emails_sent=1, records=1)
    found = [[v.message for v in verify(obs, s) if v.invariant is Id.SCENARIO_ORACLE] for s in scenarios]
    assert found == [[], ["checks:check: b says no"]]


def _called_with(obs: object, **args: str) -> None:
    """The stored send_email call made with other arguments than the record holds."""
    messages = obs.transcript.messages  # type: ignore[attr-defined]
    k, m = next((k, m) for k, m in enumerate(messages) if m.calls and m.calls[0].tool == "send_email")
    call = dataclasses.replace(m.calls[0], args={**m.calls[0].args, **args})
    messages[k] = dataclasses.replace(m, calls=(call,))


def test_a_tool_that_rewrites_its_arguments_is_still_charged_its_records() -> None:
    # send_email stores the address lower-cased: no call's arguments equal the record's, so the
    # world cannot tell the calls apart and charges them all (here the one).
    fixed = refund_case(emails_sent=2, records=1)
    _called_with(fixed, to="Ana@Example.com")
    assert ids((fixed, refund_scenario())) == set()
    broken = refund_case(emails_sent=2, records=2)
    _called_with(broken, to="Ana@Example.com")
    assert Id.AT_MOST_ONCE in ids((broken, refund_scenario()))


MAIL = """
[[services]]
name = "mail"
create = { path = "/messages" }
dedup = "header:Idempotency-Key"
tool = "send_email"
"""


def _sent(*outcomes: str) -> list[DownstreamRequest]:
    ops = iter(f"op_{k}" for k in range(1, 10))
    out = []
    for seq, outcome in enumerate(outcomes, 1):
        op = next(ops) if outcome == "applied" else "op_1"
        out.append(DownstreamRequest(seq, "mail", "POST", "/messages", "k1", outcome, 201, op, seq))
    return out


def test_a_downstream_that_applied_one_call_twice_is_at_most_once() -> None:
    scenario = refund_scenario(expect=MAIL)
    replayed = refund_case(emails_sent=2, records=0)
    replayed.downstream = _sent("applied", "replayed")
    assert ids((replayed, scenario)) == set()
    applied = refund_case(emails_sent=2, records=0)
    applied.downstream = _sent("applied", "applied")
    (v,) = [v for v in verify(applied, scenario) if v.invariant is Id.AT_MOST_ONCE]
    assert "took effect 2 times downstream: service mail applied 2 operations" in v.message
    assert v.evidence["judged_from"] == "downstream"



@pytest.mark.parametrize(("service", "field", "says"), [
    ('name = "mail"\ncreate = { path = "/m" }\ndedup = "none"', "services[0].status",
     "no dedup key and no status query"),
    ('name = "mail"\ncreate = { path = "/m" }\ndedup = "none"\nstatus = "/m/{key}"', "services[0].status",
     "a status query by {key} needs a dedup key"),
    ('name = "mail"\ncreate = { path = "/m" }\ndedup = "cookie:x"', "services[0].dedup",
     "is not a dedup rule"),
    ('name = "mail"\ncreate = { path = "/m" }\ndedup = "header:Idem potency"', "services[0].dedup",
     "an HTTP header name"),
    ('name = "Mail"\ncreate = { path = "/m" }', "services[0].name", "does not match"),
    ('name = "mail"\ncreate = { path = "/m" }\ndedup = "header:K"\ntool = "fax"', "services[0].tool",
     "tool 'fax' is not enabled"),
    ('name = "mail"\ncreate = { path = "/m" }\ndedup = "header:K"\nurl_env = "PATH"', "services[0].url_env",
     "is a variable the agent or the harness needs"),
    ('name = "mail"\ncreate = { path = "/m" }\ndedup = "header:K"\nurl_env = "CRASHMATRIX_SERVICE_SMS_URL"',
     "services[0].url_env", "is a variable the agent or the harness needs"),
    ('name = "mail"\ncreate = { path = "/m" }\ndedup = "header:K"\nurl_env = "API"\n[[services]]\n'
     'name = "sms"\ncreate = { path = "/s" }\ndedup = "header:K"\nurl_env = "API"', "services[1].url_env",
     "another service already gives its URL in 'API'"),
])
def test_a_wrong_service_is_a_scenario_error(tmp_path: Path, service: str, field: str, says: str) -> None:
    source = tmp_path / "s.toml"
    source.write_text(REFUND % {"policy": "never", "expect": f"[[services]]\n{service}"}, encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_file(source)
    assert info.value.field == field, info.value
    assert says in info.value.message, info.value



def test_a_request_elsewhere_is_no_status_query() -> None:
    # GET /health before the re-send asks the service nothing about the operation.
    obs, scenario = mailed(UNKEYED_MAIL, ("applied", None, 1), ("applied", None, 2))
    obs.downstream.insert(1, DownstreamRequest(2, "mail", "GET", "/health", None, "no_route", 404, None, 2))
    assert Id.STATUS_BEFORE_RESEND in ids((obs, scenario))
    asked, scenario = mailed(UNKEYED_MAIL, ("applied", None, 1), ("not_found", None, 2), ("applied", None, 2))
    assert Id.STATUS_BEFORE_RESEND not in ids((asked, scenario))


def test_a_re_send_after_an_unknown_outcome_in_one_incarnation_needs_a_query_first() -> None:
    # A lost reply (no status) in incarnation 1, then a re-send in the same incarnation.
    obs, scenario = mailed(UNKEYED_MAIL, ("applied", None, 1), ("applied", None, 1))
    obs.downstream[0] = dataclasses.replace(obs.downstream[0], status=None, fault="reply-lost")
    (v,) = [v for v in verify(obs, scenario) if v.invariant is Id.STATUS_BEFORE_RESEND]
    assert "after an unknown outcome (no reply)" in v.message
    # The same two sends, the first answered 201: the agent knew; no re-send of an unknown.
    known, scenario = mailed(UNKEYED_MAIL, ("applied", None, 1), ("applied", None, 1))
    assert Id.STATUS_BEFORE_RESEND not in ids((known, scenario))


def test_a_status_query_whose_answer_was_lost_asked_nothing() -> None:
    obs, scenario = mailed(UNKEYED_MAIL, ("applied", None, 1), ("status", None, 2), ("applied", None, 2))
    assert Id.STATUS_BEFORE_RESEND not in ids((obs, scenario))  # answered: it asked
    obs.downstream[1] = dataclasses.replace(obs.downstream[1], status=None, fault="reply-lost")
    assert Id.STATUS_BEFORE_RESEND in ids((obs, scenario))


def test_a_refusal_the_tool_reports_in_plain_text_is_not_called_an_invented_success() -> None:
    # The service answered (400), the tool's text says so, the verifier cannot read it as an error.
    obs, scenario = mailed(KEYED_MAIL, ("refused", "k-1", 1), emails_sent=1)
    assert Id.DOWNSTREAM_BACKED not in ids((obs, scenario))
    invented, scenario = mailed(KEYED_MAIL, emails_sent=1)
    assert Id.DOWNSTREAM_BACKED in ids((invented, scenario))
