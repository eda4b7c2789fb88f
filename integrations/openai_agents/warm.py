"""Imported by the zygote before it forks: loads what an Agents SDK incarnation would load lazily.

Importing the SDK is most of an incarnation's start-up (about 2.9 s of CPU here), but not all of
it: the OpenAI client imports its HTTP stack, TLS trust store and Responses types only when a
client is first built, and the SDK its Responses model then. Building one here (it connects to
nothing; the address is never used, and it is not made the SDK's default client) moves those
imports into the zygote. Nothing here starts a thread, opens a socket or keeps a file open: the
zygote must be safe to fork. Tracing is turned off before anything could start its exporter.
"""

from __future__ import annotations

import contextlib

import agents
import agents.memory.sqlite_session
import agents.models.multi_provider
import agents.models.openai_responses
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

import crashmatrix.integrations.openai_agents.host

__all__ = ["agents", "crashmatrix"]

agents.set_tracing_disabled(True)
with contextlib.suppress(Exception):  # a warm-up only: an incarnation reports its own errors
    OpenAIResponsesModel("gpt-4o-mini", AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1"))
del AsyncOpenAI, OpenAIResponsesModel
