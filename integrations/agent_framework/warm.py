"""Imported by the zygote before it forks: loads what an Agent Framework incarnation would load lazily.

Importing the framework is most of an incarnation's start-up, but not all of it: the OpenAI
client imports its HTTP stack and TLS trust store only when a client is first built, and the
checkpoint decoder when a checkpoint is first read. Building a client here (it connects to
nothing; the address is never used) moves those imports into the zygote. Nothing here starts a
thread, opens a socket or keeps a file open: the zygote must be safe to fork.
"""

from __future__ import annotations

import contextlib

import agent_framework
import agent_framework._workflows._checkpoint_encoding
import agent_framework._workflows._workflow

import crashmatrix.integrations.agent_framework.host

__all__ = ["agent_framework", "crashmatrix"]

with contextlib.suppress(Exception):  # a warm-up only: an incarnation reports its own errors
    from openai import AsyncOpenAI

    AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9/v1")
    del AsyncOpenAI
