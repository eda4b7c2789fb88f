"""Imported by the zygote before it forks: loads what a LangGraph incarnation would load lazily.

Importing the framework is most of an incarnation's start-up, but not all of it: the OpenAI client
imports its HTTP stack, TLS trust store and streaming helpers only when a client is first built.
Building one here (it connects to nothing; the address is never used) moves those imports into
the zygote, so each forked incarnation starts with them loaded. Nothing here starts a thread,
opens a socket or keeps a file open: the zygote must be safe to fork.
"""

from __future__ import annotations

import contextlib
import importlib.util

import langchain_core.messages
import langchain_core.messages.block_translators.langchain_v0
import langchain_core.tools
import langchain_core.tracers.stdout
import langgraph.checkpoint.serde.jsonplus
import langgraph.checkpoint.sqlite
import langgraph.graph
import langgraph.prebuilt

import crashmatrix.integrations.langgraph.host

__all__ = ["crashmatrix", "langchain_core", "langgraph"]

if importlib.util.find_spec("langchain_openai") is not None:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    with contextlib.suppress(Exception):  # a warm-up only: an incarnation reports its own errors
        ChatOpenAI(model="gpt-4o-mini", api_key=SecretStr("unused"), base_url="http://127.0.0.1:9/v1")
    del ChatOpenAI, SecretStr
