"""The conversation as the provider saw it: the calls the model asked for, from its own replies.

For an agent whose store the harness cannot read, this is the evidence it owns: every reply the
fake provider sent, in order. A call the model asked for twice (after a crash lost the first
reply, say) is two calls here, so two effects are allowed. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from crashmatrix.harness.records.observation import Request
from crashmatrix.harness.records.transcript import Message, Transcript, calls_of


def provider_transcript(requests: Sequence[Request]) -> Transcript:
    """A transcript holding one assistant message per reply, numbered by request (from 1)."""
    t = Transcript()
    for r in requests:
        reply = r.reply
        if not reply:
            continue
        content = reply.get("content")
        t.messages.append(Message(seq=r.index + 1, msg_id=f"reply{r.index + 1}", run_id="",
                                  role="assistant", content=None if content is None else str(content),
                                  calls=calls_of(reply.get("tool_calls"))))
    return t
