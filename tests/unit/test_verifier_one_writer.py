"""one-writer: a second process on a live session is refused, names the holder, and writes nothing."""

from __future__ import annotations

import dataclasses

from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.observation import IncarnationRecord, Intrusion, Observation
from crashmatrix.harness.verify import InvariantId, Violation, judge, verify
from crashmatrix.harness.verify.one_writer import check_one_writer, names_holder
from tests.support.observations import changelog_baseline, changelog_scenario

HOLDER = 2  # the baseline's recovery, which runs to its end: frozen at its 4th event
PID = 4242
COMMAND = "python -m crashmatrix.agent --session /s --workspace /w recover"
LOG = '{"seq":1,"entries":[],"crc":"00000000"}\n'
SESSION = {"session.jsonl": LOG, "session.lock": f'{{"pid": {PID}}}', "config.json": "{}"}
WORKSPACE = {"CHANGELOG.md": "# Changelog\n"}
REFUSAL = (f"durable-agent: error: session /s is locked by pid {PID} ({COMMAND}); only one process "
           "may write a session at a time\n")


def _refused() -> IncarnationRecord:
    return IncarnationRecord(HOLDER, "recover", {}, exit_code=3, requests_before=2, commits_before=4,
                             intruder=True)


def _observation(**change: object) -> Observation:
    """The baseline with a second `recover` started while inc2 was frozen; by default a correct
    refusal. `change` replaces fields of the Intrusion."""
    obs = changelog_baseline()
    obs.incarnations[HOLDER - 1].frozen_at = 4
    intrusion = Intrusion(holder=HOLDER, holder_pid=PID, holder_command=COMMAND, record=_refused(),
                          output=REFUSAL, requests_after=2, session_before=dict(SESSION),
                          session_after=dict(SESSION), workspace_before=dict(WORKSPACE),
                          workspace_after=dict(WORKSPACE))
    obs.intrusions = [dataclasses.replace(intrusion, **change)]  # type: ignore[arg-type]
    return obs


def _one_writer(obs: Observation) -> list[Violation]:
    violations = verify(obs, changelog_scenario())
    assert {v.invariant for v in violations} == {InvariantId.ONE_WRITER}, violations
    return violations


def test_a_refused_second_process_holds_and_the_invariant_is_judged() -> None:
    obs = _observation()
    assert verify(obs, changelog_scenario()) == []
    assert judge(obs, changelog_scenario()).not_applicable == []


def test_without_a_second_process_the_invariant_says_nothing() -> None:
    obs = changelog_baseline()
    assert obs.intrusions == []
    assert check_one_writer(obs, changelog_scenario()) == []


def test_an_intruder_that_committed_is_caught() -> None:
    record = _refused()
    record.exit_code = 0
    record.events = [ProbeEvent(1, "commit.before", "run_finished.aborted", {"seq": 2}),
                     ProbeEvent(2, "commit.written", "run_finished.aborted", {"seq": 2}),
                     ProbeEvent(3, "commit.after", "run_finished.aborted", {"seq": 2})]
    grown = {**SESSION, "session.jsonl": LOG + LOG.replace('"seq":1', '"seq":2')}
    [v] = _one_writer(_observation(record=record, session_after=grown, output=""))
    assert "made 1 commit(s)" in v.message
    assert "changed session.jsonl" in v.message
    assert "exited 0" in v.message
    assert v.evidence["intruder_events"] == ["#2 commit.written:run_finished.aborted",
                                             "#3 commit.after:run_finished.aborted"]


def test_an_intruder_that_only_rewrote_the_configuration_is_caught() -> None:
    # Refused as it should be, and naming the holder, but after it saved its settings.
    [v] = _one_writer(_observation(session_after={**SESSION, "config.json": '{"model": "x"}'}))
    assert v.evidence["session_changed"] == ["config.json"]
    assert v.evidence["exit_code"] == 3


def test_an_intruder_that_exited_0_is_caught_even_if_it_wrote_nothing() -> None:
    record = _refused()
    record.exit_code = 0
    [v] = _one_writer(_observation(record=record, output="durable-agent: nothing to recover\n"))
    assert "changed nothing; it exited 0" in v.message


def test_a_refusal_must_name_the_holder() -> None:
    [v] = _one_writer(_observation(output="durable-agent: error: session is busy\n"))
    assert "without naming the holder (its pid or command)" in v.message
    # The recorded output holds no pid: they differ from run to run, a case's record must not.
    let_in = _refused()
    let_in.exit_code = 0
    [named] = _one_writer(_observation(record=let_in, output=f"locked by pid {PID}; also pid {PID}1\n"))
    assert f"locked by pid $HOLDER_PID; also pid {PID}1" in named.evidence["output"]
    assert "holder_pid" not in named.evidence
    # Another number containing the pid's digits does not name it.
    assert not names_holder(f"pid {PID}1", PID, COMMAND)
    assert names_holder(f"locked by {COMMAND[:80]}", PID, COMMAND)


def test_an_intruder_that_hangs_or_makes_requests_or_acts_is_caught() -> None:
    hung = _refused()
    hung.exit_code, hung.timed_out = None, True
    [v] = _one_writer(_observation(record=hung, output=""))
    assert "never ended" in v.message
    acted = _refused()
    acted.events = [ProbeEvent(1, "effect.before", "append_note", {}),
                    ProbeEvent(2, "effect.after", "append_note", {})]
    [v] = _one_writer(_observation(record=acted, requests_after=3,
                                   workspace_after={"CHANGELOG.md": "# Changelog\nx\n"}))
    assert "ran 1 effect(s) (append_note)" in v.message
    assert "made 1 provider request(s)" in v.message
    assert v.evidence["requests"] == [2]
    assert v.evidence["workspace_changed"] == ["CHANGELOG.md"]


def test_the_frozen_holder_must_complete() -> None:
    obs = _observation()
    obs.incarnations[HOLDER - 1].exit_code = 3
    violations = verify(obs, changelog_scenario())
    mine = [v for v in violations if v.invariant is InvariantId.ONE_WRITER]
    assert len(mine) == 1
    assert "exited 3 once resumed" in mine[0].message
    assert mine[0].evidence["frozen_at"] == 4


def test_judged_without_a_store_and_before_an_unreadable_one() -> None:
    # It reads nothing of the store: a second writer is the likeliest cause of a damaged log.
    obs = _observation(output="")
    obs.transcript = dataclasses.replace(obs.transcript, integrity_error="line 3: bad seq",
                                         commits=0, runs=[], messages=[])
    assert next(v.invariant for v in verify(obs, changelog_scenario())) is InvariantId.ONE_WRITER
    obs = dataclasses.replace(_observation(output=""), store_read=False)
    judgement = judge(obs, changelog_scenario())
    assert InvariantId.ONE_WRITER not in {n.invariant for n in judgement.not_applicable}
    assert {v.invariant for v in judgement.violations} == {InvariantId.ONE_WRITER}


def test_for_an_agent_never_given_a_second_process_it_is_not_applicable_never_held() -> None:
    obs = dataclasses.replace(changelog_baseline(), concurrent=False)
    judgement = judge(obs, changelog_scenario())
    assert judgement.violations == []
    [na] = judgement.not_applicable
    assert na.invariant is InvariantId.ONE_WRITER
    assert "no 'concurrent' capability" in na.reason
    assert not na.partly
