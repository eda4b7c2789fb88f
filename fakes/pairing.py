"""The real chat API's pairing rule: every tool call answered right after it, no orphan results."""

from __future__ import annotations

from typing import Any

from crashmatrix.fakes.api_errors import ApiError, missing_tool_responses, orphan_tool_message


def check_pairing(messages: list[Any]) -> ApiError | None:
    """The first pairing violation, as the 400 the service returns, or None.

    An assistant message with `tool_calls` must be followed directly by one `tool` message per
    call id (any order); anything else before they are all answered, or the end of the list,
    is a violation. `param` names the message where a tool message was expected: the first
    non-tool message after the calls, or the assistant message itself when the list ends.
    A `tool` message whose id is not owed by the assistant message just before it is an orphan.
    """
    owed: list[str] = []
    owner = -1
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "tool":
            call_id = m.get("tool_call_id")
            if call_id in owed:
                owed.remove(call_id)
                continue
            return orphan_tool_message(i)
        if owed:
            return missing_tool_responses(i, owed)
        if role == "assistant":
            calls = m.get("tool_calls") or []
            owed = [str(c.get("id")) for c in calls if isinstance(c, dict)]
            owner = i
    if owed:
        return missing_tool_responses(owner, owed)
    return None
