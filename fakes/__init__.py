"""Test doubles for the harness: the scripted, fault-injecting fake OpenAI-compatible provider."""

from fakes.api_errors import ApiError
from fakes.case import Case, Decision
from fakes.conversation import Conversation, holds
from fakes.pairing import check_pairing
from fakes.records import RequestRecord
from fakes.server import FakeProvider

__all__ = [
    "ApiError",
    "Case",
    "Conversation",
    "Decision",
    "FakeProvider",
    "RequestRecord",
    "check_pairing",
    "holds",
]
