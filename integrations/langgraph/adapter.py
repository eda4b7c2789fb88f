"""The LangGraph adapter: `crashmatrix run --agent langgraph` hosts a LangGraph app, unmodified.

Which app: the graph factory named by `CRASHMATRIX_LANGGRAPH_APP=MODULE:ATTR` (found from the
directory crashmatrix runs in, as `python -m` would find it), else the shipped example
(`examples/langgraph_app`, `changelog_app.graph:build`). `ADAPTER.with_app("mypkg.graph:build")`
is the same adapter for another factory, for a caller (or a registry) that names it in code.

The zygote imports LangGraph, LangChain and the OpenAI client once (about 2.4 s of CPU a fresh
interpreter pays per incarnation) and forks each incarnation from there. The store reader makes
every invariant judgeable; `store` says which ones a LangGraph store gives nothing to.
This module imports no framework code: listing the agents must work without the extra.
"""

from __future__ import annotations

from types import MappingProxyType

from crashmatrix.harness.adapters.interface import Capability, LaunchSpec, python_program
from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.integrations.hosting import HostedAdapter, dist_versions
from crashmatrix.integrations.langgraph import store
from crashmatrix.integrations.langgraph.settings import APP_ENV, DEFAULT_APP, EXAMPLE_DIR, HOST, QUIET_ENV

# Imported by the zygote before it forks: the framework, the host, and what the OpenAI client
# loads lazily (`warm` says how). None of it starts a thread (a fork after one would copy a lock
# some thread held).
PRELOAD = ("crashmatrix.integrations.langgraph.warm",)


class LangGraphAdapter(HostedAdapter):
    name = "langgraph"
    program = python_program(HOST)
    host, preload, app_env, default_app = HOST, PRELOAD, APP_ENV, DEFAULT_APP
    example_dir, quiet_env = EXAMPLE_DIR, QUIET_ENV
    # kill and a store reader. Not `tear` (SQLite commits whole or not at all; a torn page is
    # the `power` model's business), not `file-store` (SQLite's journal and page writes are not
    # what the power model follows), not `concurrent` (nothing stops two processes on one
    # thread; declaring it would only show that, at a high price in cases), not `inbox`.
    # `state-in-tree`: the checkpointer's SQLite files live in the session directory and the app
    # is a function of them and the fake's replies; `run --states --audit-states 1` over every
    # built-in it runs (512 cases, 12 scenarios) found no case differing from a real kill.
    capabilities = frozenset({Capability.KILL, Capability.STORE, Capability.STATE_IN_TREE})

    # What a LangGraph app does not promise (reported as not applicable, with this reason, in
    # every summary; store.py says what each other invariant reads from its store).
    not_applicable = MappingProxyType({
        "intent-before-effect": "LangGraph records nothing before a tool runs (no intent record): "
                                "a crash after the effect makes it run the tool again, which "
                                "at-most-once and safe-rerun judge",
    })

    def profile(self) -> Profile:
        return Profile("LangGraph (Python)", dist_versions("langgraph", "langgraph-checkpoint-sqlite"),
                       'SqliteSaver (checkpoints.sqlite), durability="sync"',
                       "graph.invoke(None) on the same thread")

    def declared_branches(self) -> tuple[str, ...]:
        return ()  # LangGraph reports no recovery decisions: it resumes the thread as it is

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        return store.read_transcript(spec.session)


ADAPTER = LangGraphAdapter()  # registered as `langgraph` in pyproject.toml
