"""The support agent with a `send_email` that sends whenever it runs: a re-run sends twice.

The SDK saves a tool call together with its output, after the tool returned. If the process dies
in between, the request is run again, the model asks for the email again, and this tool emails
the customer a second time.
"""

from __future__ import annotations

import uuid
from typing import Any

from agents import Agent, function_tool

from support_agents.app import build_agent, send


@function_tool
def send_email(to: str, subject: str, body: str) -> str:
    """Email a customer.

    Args:
        to: The customer's email address.
        subject: The subject line.
        body: The message, as plain text.
    """
    send(to, subject, body, message_id=uuid.uuid4().hex)  # fresh: nothing ties a re-run to the first
    return "sent"


def build() -> Agent[Any]:
    """The agent factory: `support_agents.broken:build`."""
    return build_agent(send_email)
