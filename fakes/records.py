"""What the fake saw and did for each request, kept per case for the verifier."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    index: int  # 0-based position among this case's requests
    # The canonical, Chat-Completions-shaped history: exactly as received on the chat wire,
    # translated from the request on the others (docs/wires.md), so verifiers read one shape.
    messages: list[Any]
    tools: list[str]  # names of the tools the request offered
    status: int | None  # HTTP status returned; None when no response was sent (timeout, drop)
    fault: str | None = None  # the ProviderFault injected, if any
    rule: str | None = None  # name of the script rule that produced the reply
    reply: dict[str, Any] | None = None  # the assistant message returned, canonical shape
    error: dict[str, Any] | None = None  # the error body returned
    wire: str = "chat"  # the API the request came on: chat, responses or anthropic
    pairing: bool = False  # refused (400) for breaking the API's pairing rule

    def to_json(self) -> dict[str, Any]:
        """Its fields as JSON data, sharing (not copying) the message lists: `asdict` deep-copies
        every message, which was most of a crash state's key (`--states`). Read it, never mutate it."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
