"""Faulty downstream protocols: which key post_json's sends carry, when it asks before re-sending,
how long it waits for a reply, and what it takes a 5xx, a reset or a crash in flight to mean.

Only a scenario with a downstream service (`[[services]]`, whose tool is post_json) calls this
code: a mutant here is killed with a service in play, or not at all.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from crashmatrix.agent import downstream_call as D
from crashmatrix.agent.downstream_call import Reply, Target
from crashmatrix.harness.mutants.patching import Patcher

Ids = tuple[str, str]  # (result_id, call_id): one call, on its first run and on every re-run
Send = Callable[[Target], Reply]


def fresh_key(p: Patcher) -> None:
    def key_made_at_send(result_id: str, call_id: str) -> str:
        # The fault: a new key per request, as a client library that makes one per HTTP request.
        return f"cm-{uuid.uuid4().hex}"

    p.replace(D, "idempotency_key", key_made_at_send)


def attempt_key(p: Patcher) -> None:
    derive = D.idempotency_key
    send: Send = D.send
    post: Callable[..., tuple[str, bool]] = D.post
    attempt: dict[Ids, int] = {}  # the attempt each call's key names now
    sends: dict[Ids, int] = {}  # the call's sends within its current post

    def post_by_attempt(target: Target, *, rerun: bool) -> tuple[str, bool]:
        ids = (target.result_id, target.call_id)
        # The fault: the key names the attempt; a recovery's re-run counts as the second.
        attempt[ids] = 2 if rerun else 1
        sends[ids] = 0
        return post(target, rerun=rerun)

    def send_counting(target: Target) -> Reply:
        ids = (target.result_id, target.call_id)
        if sends.get(ids, 0):
            attempt[ids] = attempt.get(ids, 1) + 1  # a retry is the next attempt
        sends[ids] = sends.get(ids, 0) + 1
        return send(target)

    def key_of_attempt(result_id: str, call_id: str) -> str:
        return f"{derive(result_id, call_id)}-a{attempt.get((result_id, call_id), 1)}"

    p.replace(D, "post", post_by_attempt)
    p.replace(D, "send", send_counting)
    p.replace(D, "idempotency_key", key_of_attempt)


def resend_without_status(p: Patcher) -> None:
    send: Send = D.send

    def send_blind(target: Target) -> Reply:
        # The fault: the service's status query is never asked; an unknown outcome is sent again.
        return send(target)

    p.replace(D, "confirm_or_send", send_blind)


# -- one mutant per downstream fault kind: each is killed by that fault alone ----------------------
def no_client_timeout(p: Patcher) -> None:
    # The fault: the HTTP client waits for a reply for ever (exchange reads the timeout at call
    # time and hands it to the connection; None is a blocking socket). A reply the service holds
    # hangs the agent; a reply lost (a reset), a 5xx or a kill still ends the request.
    p.replace(D, "DOWNSTREAM_TIMEOUT_S", None)


def _is_5xx(status: int | None) -> bool:
    return status is not None and 500 <= status < 600


def error_means_refused(p: Patcher) -> None:
    classify: Callable[[int | None], D.Kind] = D.classify

    def classify_5xx_refused(status: int | None) -> D.Kind:
        # The fault: a 5xx is a refusal ("nothing was applied"), as for a 4xx; but a gateway may
        # fail after the service committed. The model, told so, asks again in a new call.
        return D.Kind.REFUSED if _is_5xx(status) else classify(status)

    p.replace(D, "classify", classify_5xx_refused)


def error_means_success(p: Patcher) -> None:
    classify: Callable[[int | None], D.Kind] = D.classify

    def classify_5xx_done(status: int | None) -> D.Kind:
        # The fault: any reply is taken as done (only a missing reply is unknown), so a 5xx from a
        # service that applied nothing reads to the model as the email sent.
        return D.Kind.DONE if _is_5xx(status) else classify(status)

    p.replace(D, "classify", classify_5xx_done)


def reset_means_unsent(p: Patcher) -> None:
    send: Send = D.send
    result: Callable[[Target, Reply], tuple[str, bool]] = D.result

    def send_reading_resets(target: Target) -> Reply:
        reply = send(target)
        # A reset, not a timeout ("no reply within ...s") nor another error ("no reply (<type>)").
        if reply.status is None and reply.text == D.NO_REPLY_RESET:
            # The fault: a reset is taken as "never reached the service", a definite failure; but
            # the service may have applied the request and lost only the reply. (A timeout stays
            # unknown, and is handled as the correct agent does.)
            return replace(reply, kind=D.Kind.REFUSED)
        return reply

    def result_of_reset(target: Target, reply: Reply) -> tuple[str, bool]:
        if reply.kind is D.Kind.REFUSED and reply.status is None:
            return (f"ERROR: post_json: the connection was closed or reset before the service took "
                    f"the request ({reply.step}); nothing was sent: {reply.text}"), True
        return result(target, reply)

    p.replace(D, "send", send_reading_resets)
    p.replace(D, "result", result_of_reset)


# The journal: a file per key in the process's working directory (the case directory, kept
# across the agent's restarts), written once the service's reply reported success.
JOURNAL = ".post_json-sent-{key}"


def journal_after_reply(p: Patcher) -> None:
    post: Callable[..., tuple[str, bool]] = D.post

    def post_journaled(target: Target, *, rerun: bool) -> tuple[str, bool]:
        marker = Path(JOURNAL.format(key=target.key()))
        if rerun:
            # The fault: a recovery trusts its own journal over the service. Found, it reports
            # success without asking; not found, it takes the call as never sent and sends it as a
            # new request (a key of its own); but a crash after the service applied the request
            # and before the reply came leaves no journal entry for an operation that happened.
            if marker.exists():
                return f"HTTP 200: sent before the restart (journal {marker.name})", False
            target = replace(target, call_id=f"{target.call_id}-{uuid.uuid4().hex[:8]}")
        content, is_error = post(target, rerun=False)
        if not is_error:
            marker.touch()
        return content, is_error

    p.replace(D, "post", post_journaled)
