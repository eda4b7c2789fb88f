"""Which invariants a case exercised: the situation each one judges happened in it.

A check that finds nothing to judge returns no violation, which reads like "held". A run whose
cases never delivered an input, never failed a request and never started a second process has
not shown that queued inputs, retries or session locks are handled, and must not say it did:
the summary lists such invariants apart ("never exercised"), never as checked. Each predicate is
pure, reads the harness's own evidence where it can (probe trace, requests, deliveries, exits),
and is deliberately broad: it says the situation arose, not that the check found it tricky.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId
from crashmatrix.harness.verify.resume_budget import BUDGET_WORD
from crashmatrix.scenarios.model import BoundaryKind, Outcome

K = BoundaryKind
OK = 200
# Plain strings, read once: a StrEnum member read in a loop over every event is a descriptor call.
EFFECT_BEFORE, PROVIDER_BEFORE = K.EFFECT_BEFORE.value, K.PROVIDER_BEFORE.value
FAILED, ABORTED = Outcome.FAILED.value, Outcome.ABORTED.value


def _always(obs: Observation) -> bool:
    return True


def _effect_ran(obs: Observation) -> bool:
    if not obs.probes:  # black-box: no effect probes; a changed workspace or a saved result says so
        return obs.workspace_after != obs.workspace_before or _result_committed(obs)
    return any(e.kind == EFFECT_BEFORE for inc in obs.incarnations for e in inc.events)


def _killed_after(kind: str) -> Callable[[Observation], bool]:
    """An incarnation was killed after an event of `kind`: recovery had to deal with its aftermath."""
    def seen(obs: Observation) -> bool:
        return any(inc.crashed_at is not None
                   and any(e.kind == kind and e.n <= inc.crashed_at for e in inc.events)
                   for inc in obs.incarnations)
    return seen


def _request_failed(obs: Observation) -> bool:
    return any(r.status != OK or r.fault for r in obs.requests)


def _request_failed_or_run_failed(obs: Observation) -> bool:
    """A request failed, or a run ended failed: a retry count or a step limit may have ended it."""
    return _request_failed(obs) or any(r.outcome == FAILED for r in obs.transcript.runs)


def _resumed_or_closed(obs: Observation) -> bool:
    """A run was resumed, or closed for its resume budget (a budget of 0 closes without one)."""
    return any(r.resumed_from or (r.outcome == ABORTED and BUDGET_WORD in (r.reason or "").lower())
               for r in obs.transcript.runs)


def _recovered_request(obs: Observation) -> bool:
    """A request sent by an incarnation that started after a crash: history rebuilt from the store."""
    crashed = False
    incs = obs.incarnations
    for k, inc in enumerate(incs):
        # The fake's own count of requests while it ran, where no provider probe reports them.
        end = incs[k + 1].requests_before if k + 1 < len(incs) else len(obs.requests)
        asked = end > inc.requests_before or any(e.kind == PROVIDER_BEFORE for e in inc.events)
        if crashed and asked:
            return True
        crashed = crashed or inc.interrupted
    return False


def _final_answer(obs: Observation) -> bool:
    return any(r.reply is not None and not r.reply.get("tool_calls") for r in obs.requests)


def _tool_call(obs: Observation) -> bool:
    return any(r.reply is not None and r.reply.get("tool_calls") for r in obs.requests) or any(
        m.calls for m in obs.transcript.messages)


def _result_committed(obs: Observation) -> bool:
    return any(m.role == "tool" for m in obs.transcript.messages)


def _submitted(obs: Observation) -> int:
    return sum(1 for r in obs.downstream if r.outcome in ("applied", "replayed", "conflict"))


def _settled_finished(obs: Observation) -> bool:
    return any(inc.settle for inc in obs.incarnations) and any(
        r.outcome is not None for r in obs.transcript.runs)


# What "exercised" means for each invariant; docs/invariants.md says the same in words.
EXERCISED: Mapping[InvariantId, Callable[[Observation], bool]] = MappingProxyType({
    InvariantId.ONE_WRITER: lambda obs: bool(obs.intrusions),  # a second process was started
    InvariantId.LOG_INTEGRITY: lambda obs: obs.transcript.commits > 0
    or obs.transcript.integrity_error is not None,  # there was a store to read
    InvariantId.PAIRING: _tool_call,  # the model asked for a tool call
    InvariantId.AT_MOST_ONCE: _effect_ran,  # a tool's effect ran
    InvariantId.NO_SILENT_SUCCESS: _result_committed,  # a tool result was saved
    # A downstream service received a submission (more than one, for the two about re-sends).
    InvariantId.DOWNSTREAM_KEY: lambda obs: _submitted(obs) > 1,
    InvariantId.STATUS_BEFORE_RESEND: lambda obs: _submitted(obs) > 1,
    InvariantId.DOWNSTREAM_BACKED: lambda obs: _submitted(obs) > 0,
    InvariantId.SAFE_RERUN: _killed_after(K.EFFECT_BEFORE),  # killed once an effect had started
    InvariantId.FINISHED_STAYS_FINISHED: _settled_finished,  # a finished session was recovered again
    InvariantId.CONTINUATION: _recovered_request,  # a request after a crash
    InvariantId.RESUME_BUDGET: _resumed_or_closed,
    InvariantId.QUEUED_INPUT: lambda obs: any(d.kind == "input" for d in obs.deliveries),
    InvariantId.RETRY_INTENT: _request_failed,  # the provider refused or failed a request
    InvariantId.INTENT_BEFORE_EFFECT: _effect_ran,
    InvariantId.RESERVED_RESULT: _result_committed,
    InvariantId.DURABLE_COMMITS: _killed_after(K.COMMIT_AFTER),  # killed after a commit was acknowledged
    InvariantId.FINAL_ENDS_RUN: _final_answer,  # the model gave a final answer
    InvariantId.RETRY_BOUND: _request_failed_or_run_failed,
    InvariantId.LIVENESS: _always,  # every case must end
    InvariantId.SCENARIO_ORACLE: _always,  # every case has an outcome to compare
})


def exercised(obs: Observation) -> frozenset[InvariantId]:
    """The invariants whose situation arose in this case (an invariant with no predicate, e.g.
    one a newer verifier added, counts as exercised: never hidden)."""
    # Invariants share predicates (an effect ran, a request failed, a result was saved): each
    # predicate is pure, so it is asked once per case.
    answers: dict[Callable[[Observation], bool], bool] = {}
    found: list[InvariantId] = []
    for invariant in InvariantId:
        arose = EXERCISED.get(invariant, _always)
        if arose not in answers:
            answers[arose] = arose(obs)
        if answers[arose]:
            found.append(invariant)
    return frozenset(found)
