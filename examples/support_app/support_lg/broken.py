"""The support agent with a `send_email` that sends whenever it runs: a re-run sends twice.

LangGraph saves a tool's result after the tool returns. If the process dies in between, the
restarted graph runs the tool again, and this one emails the customer a second time.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.tools import tool

from support_lg.app import build_graph, send


@tool(parse_docstring=True)
def send_email(to: str, subject: str, body: str) -> str:
    """Email a customer.

    Args:
        to: The customer's email address.
        subject: The subject line.
        body: The message, as plain text.
    """
    send(to, subject, body, message_id=uuid.uuid4().hex)  # a fresh id: nothing ties a re-run to the first
    return "sent"


def build(checkpointer: Any = None) -> Any:
    """The graph factory: `support_lg.broken:build`."""
    return build_graph(send_email, checkpointer)
