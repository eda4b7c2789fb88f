"""The Agent Framework adapter: `--agent microsoft-agent-framework` hosts a workflow app, unmodified.

Which app: the workflow factory named by `CRASHMATRIX_AGENT_FRAMEWORK_APP=MODULE:ATTR` (found
from the directory crashmatrix runs in, as `python -m` would find it), else the shipped example
(`examples/agent_framework_app`, `changelog_maf.workflow:build`).
`ADAPTER.with_app("mypkg.workflow:build")` is the same adapter for another factory, for a caller
(or a registry) that names it in code (`--agent microsoft-agent-framework:mypkg.workflow:build`).

The zygote imports Agent Framework and the OpenAI client once and forks each incarnation from
there. The store reader makes every invariant judgeable but those declared below; `store` says
what each reads from the checkpoint files. This module imports no framework code: listing the
agents must work without the extra.
"""

from __future__ import annotations

from types import MappingProxyType

from crashmatrix.harness.adapters.interface import Capability, LaunchSpec, python_program
from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.integrations.agent_framework import store
from crashmatrix.integrations.agent_framework.settings import (
    APP_ENV,
    DEFAULT_APP,
    EXAMPLE_DIR,
    HOST,
    QUIET_ENV,
)
from crashmatrix.integrations.hosting import HostedAdapter, dist_versions

# Imported by the zygote before it forks: the framework, the host, and what the OpenAI client
# loads lazily (`warm` says how). None of it starts a thread.
PRELOAD = ("crashmatrix.integrations.agent_framework.warm",)


class AgentFrameworkAdapter(HostedAdapter):
    name = "microsoft-agent-framework"
    program = python_program(HOST)
    host, preload, app_env, default_app = HOST, PRELOAD, APP_ENV, DEFAULT_APP
    example_dir, quiet_env = EXAMPLE_DIR, QUIET_ENV
    # kill and a store reader. Not `tear` (each checkpoint is a whole file put in place by
    # os.replace: a kill cannot leave half of one), not `file-store` (not measured yet: the
    # storage writes without fsync, which the power model would judge, and its black-box points
    # were not checked for determinism), not `concurrent` (nothing stops two processes on one
    # checkpoint directory; declaring it would only show that), not `inbox`.
    # `state-in-tree`: the checkpoint directory is in the session directory; `run --states
    # --audit-states 1` over every built-in it runs (216 cases, 12 scenarios) found no case
    # differing from a real kill.
    capabilities = frozenset({Capability.KILL, Capability.STORE, Capability.STATE_IN_TREE})

    # What a checkpointed workflow does not promise (reported as not applicable, with this
    # reason, in every summary; store.py says what each other invariant reads from its store).
    not_applicable = MappingProxyType({
        "intent-before-effect": "Agent Framework records nothing before a tool runs: a workflow "
                                "checkpoints only between supersteps, and an agent's whole turn "
                                "(model calls and tool calls) is one superstep, so a crash in it "
                                "resumes the turn from its input, which at-most-once judges",
        "resume-budget": "a resume from a checkpoint leaves no record of itself, and Agent "
                         "Framework has no resume budget: nothing to count",
    })

    def profile(self) -> Profile:
        return Profile("Microsoft Agent Framework (Python)", dist_versions("agent-framework-core"),
                       "FileCheckpointStorage: a checkpoint per superstep",
                       "workflow.run(checkpoint_id=the latest checkpoint)")

    def declared_branches(self) -> tuple[str, ...]:
        return ()  # the framework reports no recovery decisions: it resumes the latest checkpoint

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        return store.read_transcript(spec.session)


ADAPTER = AgentFrameworkAdapter()  # registered as `microsoft-agent-framework` in pyproject.toml
