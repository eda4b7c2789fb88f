"""The LangGraph.js adapter: `crashmatrix run --agent langgraph-js` hosts a LangGraph.js app, unmodified.

Which app: the graph factory named by `CRASHMATRIX_LANGGRAPH_JS_APP=FILE:EXPORT` (FILE relative
to the directory crashmatrix runs in), else the shipped example (`examples/langgraph_js_app`,
`graph.mjs:build`); `--agent langgraph-js:src/graph.mjs:build` names it on the command line.
The app's project must have its packages installed (`npm ci` there): the host loads LangGraph.js,
the SQLite checkpointer and LangChain from the app's node_modules.

Every incarnation is a fresh Node process (about 0.7 s to load the framework), except that a
`recover` with nothing to resume ends before loading it (the host checks the database first:
docs/frameworks.md, "Node start cost"). The store reader makes every invariant judgeable; `store`
says which ones a LangGraph store gives nothing to.
"""

from __future__ import annotations

from types import MappingProxyType

from crashmatrix.harness.adapters.interface import Capability, LaunchSpec
from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.integrations.langgraph_js import store
from crashmatrix.integrations.langgraph_js.settings import APP_ENV, DEFAULT_APP, EXAMPLE_DIR, HOST, QUIET_ENV
from crashmatrix.integrations.node_hosting import NodeHostedAdapter, node_package_versions, node_program


class LangGraphJsAdapter(NodeHostedAdapter):
    name = "langgraph-js"
    program = node_program(HOST)
    host, app_env, default_app = str(HOST), APP_ENV, DEFAULT_APP
    example_dir, quiet_env = EXAMPLE_DIR, QUIET_ENV
    # kill and a store reader. Not `tear` (SQLite commits whole or not at all), not `file-store`
    # (SQLite's journal and page writes are not what the power model follows), not `concurrent`
    # (nothing stops two processes on one thread), not `inbox`. `state-in-tree`: the checkpoint
    # database is in the session directory; `run --states --audit-states 1` over every built-in it
    # runs (654 cases, 16 scenarios) found no case differing from a real kill.
    capabilities = frozenset({Capability.KILL, Capability.STORE, Capability.STATE_IN_TREE})

    not_applicable = MappingProxyType({
        "intent-before-effect": "LangGraph.js records nothing before a tool runs (no intent record): "
                                "a crash after the effect makes it run the tool again, which "
                                "at-most-once and safe-rerun judge",
    })

    def profile(self) -> Profile:
        return Profile("LangGraph.js", node_package_versions(self.app, "@langchain/langgraph",
                                                             "@langchain/langgraph-checkpoint-sqlite"),
                       'SqliteSaver (checkpoints.sqlite), durability: "sync"',
                       "graph.invoke(null) on the same thread")

    def declared_branches(self) -> tuple[str, ...]:
        return ()  # LangGraph.js reports no recovery decisions: it resumes the thread as it is

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        return store.read_transcript(spec.session)


ADAPTER = LangGraphJsAdapter()  # registered as `langgraph-js` in pyproject.toml
