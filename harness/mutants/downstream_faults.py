"""Faulty downstream protocols: which key post_json's sends carry, and when it asks before re-sending.

Only a scenario with a downstream service (`[[services]]`, whose tool is post_json) calls this
code: a mutant here is killed with a service in play, or not at all.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

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
