"""The OpenAI Agents SDK adapter: `crashmatrix run --agent openai-agents` hosts an Agents SDK app, unmodified.

Which app: the agent factory named by `CRASHMATRIX_OPENAI_AGENTS_APP=MODULE:ATTR` (found from the
directory crashmatrix runs in, as `python -m` would find it), else the shipped example
(`examples/openai_agents_app`, `changelog_agents.agent:build`).
`ADAPTER.with_app("mypkg.agent:build")` is the same adapter for another factory, for a caller
(or a registry) that names it in code.

The zygote imports the SDK and the OpenAI client once (about 2.9 s of CPU a fresh interpreter
pays per incarnation) and forks each incarnation from there. The store reader makes every
invariant judgeable; `store` says which ones an Agents SDK session gives nothing to.
This module imports no framework code: listing the agents must work without the extra.
"""

from __future__ import annotations

from types import MappingProxyType

from crashmatrix.harness.adapters.interface import Capability, LaunchSpec, python_program
from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.integrations.hosting import HostedAdapter, dist_versions
from crashmatrix.integrations.openai_agents import store
from crashmatrix.integrations.openai_agents.settings import APP_ENV, DEFAULT_APP, EXAMPLE_DIR, HOST, QUIET_ENV

# Imported by the zygote before it forks: the SDK, the host, and what the OpenAI client loads
# lazily (`warm` says how). None of it starts a thread.
PRELOAD = ("crashmatrix.integrations.openai_agents.warm",)


class OpenAIAgentsAdapter(HostedAdapter):
    name = "openai-agents"
    program = python_program(HOST)
    host, preload, app_env, default_app = HOST, PRELOAD, APP_ENV, DEFAULT_APP
    example_dir, quiet_env = EXAMPLE_DIR, QUIET_ENV
    # kill, a store reader, and file-store: the session is one SQLite database (and its -wal and
    # -shm files) in the session directory, written by the agent's own process, so black-box
    # crash points and the power model can act on its writes. Not `tear` (SQLite commits whole
    # or not at all), not `concurrent` (nothing stops two processes on one session; declaring it
    # would only show that), not `inbox` (an SDK run takes its input when it starts).
    # `state-in-tree`: that database is all a restart reads; `run --states --audit-states 1` over
    # every built-in it runs (239 cases, 12 scenarios) found no case differing from a real kill.
    capabilities = frozenset({Capability.KILL, Capability.STORE, Capability.FILE_STORE,
                              Capability.STATE_IN_TREE})

    # What an Agents SDK app does not promise (reported as not applicable, with this reason, in
    # every summary).
    not_applicable = MappingProxyType({
        "intent-before-effect": "the Agents SDK saves a tool call only together with its output, "
                                "after the tool ran (no intent record): a crash in between makes "
                                "the restart run it again, which at-most-once and safe-rerun judge",
    })

    def profile(self) -> Profile:
        return Profile("OpenAI Agents SDK (Python)", dist_versions("openai-agents"),
                       "SQLiteSession (session.sqlite)",
                       "Runner.run again with the session and no new input")

    def declared_branches(self) -> tuple[str, ...]:
        return ()  # the SDK reports no recovery decisions: a restart runs the input again

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        return store.read_transcript(spec.session)


ADAPTER = OpenAIAgentsAdapter()  # registered as `openai-agents` in pyproject.toml
