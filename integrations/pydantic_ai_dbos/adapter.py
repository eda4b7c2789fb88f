"""The Pydantic AI + DBOS adapter: `--agent pydantic-ai-dbos` hosts a durable Pydantic AI app, unmodified.

Which app: the `DBOSAgent` (or a function returning one) named by
`CRASHMATRIX_PYDANTIC_AI_DBOS_APP=MODULE:ATTR` (found from the directory crashmatrix runs in, as
`python -m` would find it), else the shipped example (`examples/pydantic_ai_dbos_app`,
`changelog_dbos.agent:agent`). `ADAPTER.with_app("mypkg.agent:agent")` is the same adapter for
another app, for a caller (or a registry) that names it in code.

The zygote imports Pydantic AI, DBOS and the OpenAI client once and forks each incarnation from
there. The store reader makes every invariant judgeable but the one declared not applicable;
`store` says what a DBOS store gives nothing to. This module imports no framework code:
listing the agents must work without the extra.
"""

from __future__ import annotations

from types import MappingProxyType

from crashmatrix.harness.adapters.interface import Capability, LaunchSpec, python_program
from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.integrations.hosting import HostedAdapter, dist_versions
from crashmatrix.integrations.pydantic_ai_dbos import store
from crashmatrix.integrations.pydantic_ai_dbos.settings import (
    APP_ENV,
    DEFAULT_APP,
    EXAMPLE_DIR,
    HOST,
    QUIET_ENV,
)

# Imported by the zygote before it forks: the framework, the host, and what the OpenAI client
# loads lazily (`warm` says how). None of it starts a thread.
PRELOAD = ("crashmatrix.integrations.pydantic_ai_dbos.warm",)


class PydanticAIDBOSAdapter(HostedAdapter):
    name = "pydantic-ai-dbos"
    program = python_program(HOST)
    host, preload, app_env, default_app = HOST, PRELOAD, APP_ENV, DEFAULT_APP
    example_dir, quiet_env = EXAMPLE_DIR, QUIET_ENV
    # kill, a store reader, and `file-store`: the system database is a SQLite file (and its
    # rollback journal) in the session directory, written and synced by the agent's own process,
    # so the power model applies (the host syncs the session directory's name when it makes it).
    # DBOS writes that database from several threads (queue polling, recovery, bookkeeping at
    # every launch): `--black-box` refuses those files, naming them, rather than crash at an
    # n-th call that is another call in another run. Not `tear` (SQLite commits whole or not at
    # all), not `concurrent` (nothing stops two processes on one system database; declaring it
    # would only show that), not `inbox`.
    capabilities = frozenset({Capability.KILL, Capability.STORE, Capability.FILE_STORE})

    # What a DBOS app does not promise (reported as not applicable, with this reason, in every
    # summary; store.py says what each other invariant reads from its store).
    not_applicable = MappingProxyType({
        "intent-before-effect": "a plain function tool is no DBOS step: nothing is recorded "
                                "before it runs (no intent record), and recovery re-executes "
                                "the workflow and runs it again, which at-most-once and "
                                "safe-rerun judge",
    })

    def profile(self) -> Profile:
        return Profile("Pydantic AI + DBOS", dist_versions("pydantic-ai-slim", "dbos"),
                       "DBOS system database (SQLite): workflow status and step outputs",
                       "DBOS.launch() recovers the pending workflow")

    def declared_branches(self) -> tuple[str, ...]:
        return ()  # DBOS reports no recovery decisions: it re-executes the workflow

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        return store.read_transcript(spec.session)


ADAPTER = PydanticAIDBOSAdapter()  # registered as `pydantic-ai-dbos` in pyproject.toml
