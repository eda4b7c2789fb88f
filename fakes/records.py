"""What the fake saw and did for each request, kept per case for the verifier."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    index: int  # 0-based position among this case's requests
    messages: list[Any]  # exactly as received (the parsed JSON)
    tools: list[str]  # names of the tools the request offered
    status: int | None  # HTTP status returned; None when no response was sent (timeout, drop)
    fault: str | None = None  # the ProviderFault injected, if any
    rule: str | None = None  # name of the script rule that produced the reply
    reply: dict[str, Any] | None = None  # the assistant message returned
    error: dict[str, Any] | None = None  # the error body returned

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
