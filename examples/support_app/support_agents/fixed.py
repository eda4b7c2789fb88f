"""The support agent with an idempotent `send_email`: the same email to the same customer is sent once.

The SDK does not resume a run: after a crash the request is run again and the model asks for the
email again, with a tool-call id of its choosing. So the key cannot be the call's id (a
deterministic test model would repeat it, a real one would not): it is the business's own, what
makes two emails the same email (here the recipient and the subject), used as the message id.
The tool does not send when the outbox already holds that message.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agents import Agent, function_tool

from support_agents.app import build_agent, send, sent_ids


def email_key(to: str, subject: str) -> str:
    """The idempotency key of an email: one per recipient and subject."""
    return hashlib.sha256(f"{to.strip().lower()}\n{subject.strip()}".encode()).hexdigest()[:32]


@function_tool
def send_email(to: str, subject: str, body: str) -> str:
    """Email a customer.

    Args:
        to: The customer's email address.
        subject: The subject line.
        body: The message, as plain text.
    """
    key = email_key(to, subject)
    if key not in sent_ids():
        send(to, subject, body, message_id=key)
    return "sent"


def build() -> Agent[Any]:
    """The agent factory: `support_agents.fixed:build`."""
    return build_agent(send_email)
