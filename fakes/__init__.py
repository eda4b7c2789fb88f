"""Test doubles for the harness: the scripted, fault-injecting fake LLM provider and fake downstream."""

from crashmatrix.fakes.api_errors import ApiError
from crashmatrix.fakes.case import Case, CaseState, Decision
from crashmatrix.fakes.conversation import Conversation, holds
from crashmatrix.fakes.downstream import Downstream, DownstreamRecord
from crashmatrix.fakes.downstream_server import FakeDownstream
from crashmatrix.fakes.pairing import check_pairing
from crashmatrix.fakes.records import RequestRecord
from crashmatrix.fakes.server import FakeProvider

__all__ = [
    "ApiError",
    "Case",
    "CaseState",
    "Conversation",
    "Decision",
    "Downstream",
    "DownstreamRecord",
    "FakeDownstream",
    "FakeProvider",
    "RequestRecord",
    "check_pairing",
    "holds",
]
