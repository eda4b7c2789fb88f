"""The support agent whose `send_email` calls a mail API, keyed on the tool-call id.

This is how a user first writes it, and on the Agents SDK it does not hold: after a crash the
request is run again and the model asks for the email again, and a real model (like the
scenario's, with fresh call ids) gives that call a new id. The API sees a new key and sends a
second email (`support_agents.fixed` keys on the email itself instead).
"""

from __future__ import annotations

from typing import Any

import mailapi
from agents import Agent, function_tool
from agents.tool_context import ToolContext

from support_agents.app import build_agent


@function_tool
def send_email(ctx: ToolContext[Any], to: str, subject: str, body: str) -> str:
    """Email a customer.

    Args:
        to: The customer's email address.
        subject: The subject line.
        body: The message, as plain text.
    """
    return f"sent {mailapi.send(to, subject, body, key=ctx.tool_call_id)}"


def build() -> Agent[Any]:
    """The agent factory: `support_agents.api:build`."""
    return build_agent(send_email)
