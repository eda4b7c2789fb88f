"""The ordered table of invariant checks, and `judge`, which runs every one that applies."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, NotApplicable, Violation
from crashmatrix.harness.verify.at_most_once import check_at_most_once
from crashmatrix.harness.verify.continuation import check_continuation
from crashmatrix.harness.verify.downstream_backed import check_downstream_backed
from crashmatrix.harness.verify.downstream_key import check_downstream_key
from crashmatrix.harness.verify.durable_commits import check_durable_commits
from crashmatrix.harness.verify.exercised import exercised
from crashmatrix.harness.verify.final_ends_run import check_final_ends_run
from crashmatrix.harness.verify.finished import check_finished_stays_finished
from crashmatrix.harness.verify.intent_before_effect import check_intent_before_effect
from crashmatrix.harness.verify.liveness import check_liveness
from crashmatrix.harness.verify.log_integrity import check_log_integrity
from crashmatrix.harness.verify.no_silent_success import check_no_silent_success
from crashmatrix.harness.verify.one_writer import check_one_writer
from crashmatrix.harness.verify.oracle import check_scenario_oracle
from crashmatrix.harness.verify.pairing import check_pairing
from crashmatrix.harness.verify.provider_view import provider_transcript
from crashmatrix.harness.verify.queued_input import check_queued_input
from crashmatrix.harness.verify.reserved_result import check_reserved_result
from crashmatrix.harness.verify.resume_budget import check_resume_budget
from crashmatrix.harness.verify.retry_bound import check_retry_bound
from crashmatrix.harness.verify.retry_intent import check_retry_intent
from crashmatrix.harness.verify.safe_rerun import check_safe_rerun
from crashmatrix.harness.verify.status_before_resend import check_status_before_resend
from crashmatrix.harness.verify.trace import shared_trace
from crashmatrix.scenarios.model import Scenario

Check = Callable[[Observation, Scenario], list[Violation]]

CHECKS: Mapping[InvariantId, Check] = MappingProxyType({
    InvariantId.ONE_WRITER: check_one_writer,
    InvariantId.LOG_INTEGRITY: check_log_integrity,
    InvariantId.PAIRING: check_pairing,
    InvariantId.AT_MOST_ONCE: check_at_most_once,
    InvariantId.NO_SILENT_SUCCESS: check_no_silent_success,
    InvariantId.DOWNSTREAM_KEY: check_downstream_key,
    InvariantId.STATUS_BEFORE_RESEND: check_status_before_resend,
    InvariantId.DOWNSTREAM_BACKED: check_downstream_backed,
    InvariantId.SAFE_RERUN: check_safe_rerun,
    InvariantId.FINISHED_STAYS_FINISHED: check_finished_stays_finished,
    InvariantId.CONTINUATION: check_continuation,
    InvariantId.RESUME_BUDGET: check_resume_budget,
    InvariantId.QUEUED_INPUT: check_queued_input,
    InvariantId.RETRY_INTENT: check_retry_intent,
    InvariantId.INTENT_BEFORE_EFFECT: check_intent_before_effect,
    InvariantId.RESERVED_RESULT: check_reserved_result,
    InvariantId.DURABLE_COMMITS: check_durable_commits,
    InvariantId.FINAL_ENDS_RUN: check_final_ends_run,
    InvariantId.RETRY_BOUND: check_retry_bound,
    InvariantId.LIVENESS: check_liveness,
    InvariantId.SCENARIO_ORACLE: check_scenario_oracle,
})

# Checks that still mean something when the store could not be read at all: every other check
# would judge an empty transcript and blame the agent for history the reader lost. (one-writer
# reads nothing of the store; a second writer is the likeliest cause of a log no reader can read.)
WITHOUT_STORE = frozenset({InvariantId.ONE_WRITER, InvariantId.LOG_INTEGRITY, InvariantId.LIVENESS})


# What each invariant reads from the agent's store: without a store reader (an adapter with no
# `store` capability) it cannot be judged, and says so. The others are judged from what the
# harness owns: the workspace and its witnesses, the provider's replies, the probe trace, exits.
FROM_STORE: Mapping[InvariantId, str] = MappingProxyType({
    InvariantId.LOG_INTEGRITY: "the store's commits",
    InvariantId.NO_SILENT_SUCCESS: "the stored results",
    InvariantId.DOWNSTREAM_BACKED: "the stored results, each success to be backed downstream",
    InvariantId.SAFE_RERUN: "the recorded intents (tool_started) and their replay policies",
    InvariantId.FINISHED_STAYS_FINISHED: "the runs' recorded outcomes",
    InvariantId.RESUME_BUDGET: "the resume counts the runs record",
    InvariantId.QUEUED_INPUT: "how the inputs were taken into the store",
    InvariantId.RETRY_INTENT: "the retry_pending records",
    InvariantId.INTENT_BEFORE_EFFECT: "the recorded intents (tool_started) the effects must follow",
    InvariantId.RESERVED_RESULT: "the result ids the intents (tool_started) reserved",
    InvariantId.DURABLE_COMMITS: "the commits the store holds, to compare with those acknowledged",
})
# Judged in part from the provider's requests alone; the part that needs the store is named.
PARTLY_FROM_STORE: Mapping[InvariantId, str] = MappingProxyType({
    InvariantId.PAIRING: "stored calls and results (judged: the API's own refusals of the "
                         "history sent)",
    InvariantId.CONTINUATION: "requests against the committed history (judged: the task once in "
                              "every request, no invented user message)",
    InvariantId.SCENARIO_ORACLE: "the run's outcome, turns and final answer (judged: files and "
                                 "lines)",
    InvariantId.LIVENESS: "whether a run was left open (judged: hangs, exit codes, harness errors)",
    InvariantId.AT_MOST_ONCE: "each call's recorded replay policy (judged: the effects in the "
                              "workspace, its witnesses and the probes, against the calls the model "
                              "asked for)",
    InvariantId.DOWNSTREAM_KEY: "the calls the store holds (judged: against the calls the model "
                                "asked for)",
    InvariantId.STATUS_BEFORE_RESEND: "the calls the store holds (judged: against the calls the "
                                      "model asked for)",
    InvariantId.FINAL_ENDS_RUN: "where a final answer's commit landed and which run chain each "
                                "request was made for (judged: no request's history goes on past "
                                "a final answer without a new user message)",
    InvariantId.RETRY_BOUND: "the attempt numbers the retry_pending records carry, whether a run "
                             "gave up before max_retries, and each run chain's replies against "
                             "max_steps (judged: the retryable failures of each step, as the "
                             "provider saw them, against max_retries and the crashes)",
})


# What each invariant reads from the probe trace: in black-box mode (the agent ran without
# probes, `--black-box`) it cannot be judged, and says so. Every other invariant reads the store,
# the requests, the workspace and the exits, which a black-box run has as any other.
FROM_PROBES: Mapping[InvariantId, str] = MappingProxyType({
    InvariantId.SAFE_RERUN: "which incarnations ran each call (its effect probes)",
    InvariantId.QUEUED_INPUT: "inputs delivered at the agent's probe events",
    InvariantId.INTENT_BEFORE_EFFECT: "when each effect ran (its effect.before probes), to order it "
                                      "after its intent",
    InvariantId.DURABLE_COMMITS: "the commits the agent acknowledged (its commit.after probes)",
})
# Judged in part without probes; the part that needs them is named.
PARTLY_FROM_PROBES: Mapping[InvariantId, str] = MappingProxyType({
    InvariantId.AT_MOST_ONCE: "the effect probes (judged: the effects in the workspace and its "
                              "witnesses, against the calls the model asked for)",
    InvariantId.NO_SILENT_SUCCESS: "whether the call behind each successful result ran (its "
                                   "effect.after probes) (judged: every recovered-unknown result is "
                                   "an error that says the outcome is unknown)",
    InvariantId.RETRY_INTENT: "whether each retry_pending was committed before the next request (the "
                              "order probe events give) (judged: a record per failed request, and "
                              "the retry a recovery owes)",
    InvariantId.FINAL_ENDS_RUN: "where the final answer's commit landed (its commit probes) (judged: "
                                "no request's history goes on past a final answer)",
    InvariantId.SCENARIO_ORACLE: "whether a crash came before a line rule's boundary (a rule with "
                                 "missing_ok_if_crash_before then accepts the line missing after "
                                 "any crash) (judged: files, line counts and the run's outcome)",
})


@dataclasses.dataclass(frozen=True)
class Judgement:
    violations: list[Violation]
    not_applicable: list[NotApplicable]
    # The invariants whose situation arose in the case (harness/verify/exercised.py), CHECKS order.
    exercised: list[InvariantId] = dataclasses.field(default_factory=list)


def judge(obs: Observation, scenario: Scenario) -> Judgement:
    """Every violation the observation shows, in CHECKS order, then in each check's own order;
    and every invariant that could not be judged, with the reason."""
    skipped: list[NotApplicable] = []
    partly: list[NotApplicable] = []
    arose = exercised(obs)
    if not obs.store_read:
        # The harness's own evidence stands in for the store: the calls the model asked for.
        obs = dataclasses.replace(obs, transcript=provider_transcript(obs.requests))
        why = "and the agent's adapter reads no store (no 'store' capability)"
        skipped = [NotApplicable(i, f"it reads {what}, {why}") for i, what in FROM_STORE.items()]
        partly = [NotApplicable(i, f"{what}, {why}", partly=True)
                  for i, what in PARTLY_FROM_STORE.items()]
    if not obs.probes:
        why = "and the agent ran without probes (--black-box)"
        skipped += [NotApplicable(i, f"it reads {what}, {why}") for i, what in FROM_PROBES.items()
                    if not any(s.invariant is i for s in skipped)]
        partly += [NotApplicable(i, f"{what}, {why}", partly=True) for i, what in PARTLY_FROM_PROBES.items()
                   if not any(s.invariant is i for s in skipped)]
    for name, reason in sorted(obs.declared_not_applicable.items()):
        invariant = InvariantId(name)
        if not any(s.invariant is invariant for s in skipped):
            skipped.append(NotApplicable(invariant, f"the agent's adapter declares: {reason}"))
    if not obs.concurrent:
        skipped.append(NotApplicable(InvariantId.ONE_WRITER, (
            "no second process is started on its sessions: the agent's adapter declares no "
            "'concurrent' capability")))
    t = obs.transcript
    unreadable = t.integrity_error is not None and t.commits == 0 and not t.runs and not t.messages
    out: list[Violation] = []
    not_judged = {s.invariant for s in skipped}
    with shared_trace(obs):
        for invariant, check in CHECKS.items():
            if unreadable and invariant not in WITHOUT_STORE:
                continue
            if invariant in not_judged:
                continue
            out += check(obs, scenario)
    order = list(CHECKS)
    return Judgement(out, sorted(_merged(skipped, partly), key=lambda n: order.index(n.invariant)),
                     [i for i in order if i in arose])


def _merged(skipped: list[NotApplicable], partly: list[NotApplicable]) -> list[NotApplicable]:
    """One entry per invariant: not judged at all wins over partly; two reasons are joined."""
    whole: dict[InvariantId, NotApplicable] = {}
    for n in skipped:
        whole.setdefault(n.invariant, n)
    part: dict[InvariantId, NotApplicable] = {}
    for n in partly:
        if n.invariant in whole:
            continue
        seen = part.get(n.invariant)
        joined = n if seen is None else dataclasses.replace(seen, reason=f"{seen.reason}; {n.reason}")
        part[n.invariant] = joined
    return [*whole.values(), *part.values()]


def verify(obs: Observation, scenario: Scenario) -> list[Violation]:
    """Every violation the observation shows (see `judge`)."""
    return judge(obs, scenario).violations
