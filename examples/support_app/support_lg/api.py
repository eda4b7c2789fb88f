"""The support agent whose `send_email` calls a mail API, keyed on the tool-call id.

This is how a user first writes it: the tool-call id looks like a natural idempotency key. It
holds on LangGraph, which after a crash re-runs the tool call it had saved, with the same id: the
API sees the same key and sends nothing twice.
"""

from __future__ import annotations

from typing import Annotated, Any

import mailapi
from langchain_core.tools import InjectedToolCallId, tool

from support_lg.app import build_graph


@tool(parse_docstring=True)
def send_email(to: str, subject: str, body: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Email a customer.

    Args:
        to: The customer's email address.
        subject: The subject line.
        body: The message, as plain text.
    """
    return f"sent {mailapi.send(to, subject, body, key=tool_call_id)}"


def build(checkpointer: Any = None) -> Any:
    """The graph factory: `support_lg.api:build`."""
    return build_graph(send_email, checkpointer)
