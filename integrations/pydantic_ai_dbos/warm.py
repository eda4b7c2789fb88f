"""Imported by the zygote before it forks: loads what a Pydantic AI + DBOS incarnation would load lazily.

Importing Pydantic AI, DBOS (with SQLAlchemy) and the OpenAI client is most of an incarnation's
start-up, but not all of it: the OpenAI client imports its HTTP stack and TLS trust store only
when a client is first built, and Pydantic AI its OpenAI model module when first named.
Building one here (it connects to nothing; the address is never used) moves those imports into
the zygote. Nothing here constructs DBOS (`DBOS(...)` and `launch()` start threads and open the
database), opens a socket or keeps a file open: the zygote must be safe to fork.
"""

from __future__ import annotations

import contextlib

import dbos
import dbos._sys_db_sqlite
import pydantic_ai
import pydantic_ai.durable_exec.dbos
import sqlalchemy.dialects.sqlite
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import crashmatrix.integrations.pydantic_ai_dbos.host

__all__ = ["crashmatrix", "dbos", "pydantic_ai", "sqlalchemy"]

with contextlib.suppress(Exception):  # a warm-up only: an incarnation reports its own errors
    OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider(api_key="unused",
                                                           base_url="http://127.0.0.1:9/v1"))
del OpenAIChatModel, OpenAIProvider
