"""What a wire is: how one API's requests become the canonical view, and replies its responses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from crashmatrix.fakes.api_errors import ApiError
from crashmatrix.fakes.response_store import ResponseStore


@dataclass(frozen=True)
class Canonical:
    """A request as the script sees it: Chat-Completions-shaped `messages`, whatever the wire.

    `context` is the wire's own data that its response needs (the Responses API's expanded
    input items, say); the script never reads it.
    """

    messages: list[Any]
    tools: list[str]
    model: str
    stream: bool = False
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Refusal:
    """A request the wire refuses (shape or pairing), with what to record of its history."""

    error: ApiError
    messages: list[Any]
    tools: list[str] = field(default_factory=list)
    pairing: bool = False  # refused for breaking the pairing rule (not for its shape)


@dataclass(frozen=True)
class Rendered:
    """A 200 answer: the body, and for a streamed request the server-sent events that carry it."""

    body: dict[str, Any]
    events: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class WireErrors:
    """The errors every wire renders in its own shape (faults, gaps, unreadable bodies)."""

    invalid_json: Callable[[], ApiError]
    server_error: Callable[[], ApiError]
    rate_limited: Callable[[], ApiError]
    script_gap: Callable[[str], ApiError]
    unknown_case: Callable[[str], ApiError]


class Wire(Protocol):
    """One API spoken by the fake. Each is stateless; what a wire must remember between requests
    (the Responses API's stored responses) lives in the case's ResponseStore."""

    name: str  # recorded on every request as RequestRecord.wire
    suffix: str  # the URL path after the case key, e.g. "/v1/chat/completions"
    errors: WireErrors

    def parse(self, payload: Any, store: ResponseStore) -> Canonical | Refusal:
        """The canonical view of a request, or its refusal (the API's own 400)."""
        ...

    def call_id(self, k: int) -> str:
        """The id of the k-th tool call in a history, in this API's format."""
        ...

    def render(self, message: dict[str, Any], request: Canonical,
               store: ResponseStore) -> Rendered:
        """The API's 200 answer carrying the canonical assistant `message`."""
        ...
