"""What both variants share: the order lookup, the outbox, and the agent around a `send_email` tool.

Nothing here knows about crashmatrix. Written as the Agents SDK documents an agent: `Agent(...)`
with `@function_tool` functions; the model is the SDK's default client, which takes its server
from `OPENAI_BASE_URL`. The tools act on the current directory, where `orders.json` holds the
orders and `outbox.jsonl` the emails sent (one JSON record per email: a stand-in for a mail API
whose every call sends a message). `broken.py` and `fixed.py` each bring a `send_email` and a
`build()` factory.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, function_tool

ORDERS = Path("orders.json")
OUTBOX = Path("outbox.jsonl")
INSTRUCTIONS = ("You are a customer-support agent. Look orders up before you write about them, "
                "email the customer once, and say what you did.")


@function_tool
def lookup_order(order_id: str) -> str:
    """Look an order up by its id: the customer's email, the item and the order's status.

    Args:
        order_id: The order's id, e.g. A-1001.
    """
    orders = json.loads(ORDERS.read_text(encoding="utf-8")) if ORDERS.exists() else {}
    order = orders.get(order_id)
    return "no such order" if order is None else json.dumps(order, ensure_ascii=False)


def send(to: str, subject: str, body: str, message_id: str) -> None:
    """Send one email: one record appended to the outbox."""
    record = {"to": to, "subject": subject, "body": body,
              "sent_at": datetime.now(UTC).isoformat(timespec="seconds"), "message_id": message_id}
    with OUTBOX.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")


def sent_ids() -> set[str]:
    """The message ids of the emails already in the outbox."""
    if not OUTBOX.exists():
        return set()
    lines = OUTBOX.read_text(encoding="utf-8").splitlines()
    return {json.loads(line)["message_id"] for line in lines if line.strip()}


def build_agent(send_email: FunctionTool) -> Agent[Any]:
    """The agent, with the order lookup and this `send_email`."""
    return Agent(name="support", instructions=INSTRUCTIONS, model="gpt-4o-mini",
                 tools=[lookup_order, send_email])
