"""The support agent with an idempotent `send_email`: a re-run of the same call sends nothing.

After a crash LangGraph re-runs the tool call it had saved, with the same tool-call id. The tool
receives that id (`InjectedToolCallId`: LangGraph passes it, the model never sees it), uses it
as the email's message id, and does not send when the outbox already holds that message.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.tools import InjectedToolCallId, tool

from support_lg.app import build_graph, send, sent_ids


@tool(parse_docstring=True)
def send_email(to: str, subject: str, body: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Email a customer.

    Args:
        to: The customer's email address.
        subject: The subject line.
        body: The message, as plain text.
    """
    if tool_call_id not in sent_ids():
        send(to, subject, body, message_id=tool_call_id)
    return "sent"


def build(checkpointer: Any = None) -> Any:
    """The graph factory: `support_lg.fixed:build`."""
    return build_graph(send_email, checkpointer)
