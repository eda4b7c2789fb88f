"""The Agents SDK (JS) adapter: `crashmatrix run --agent openai-agents-js` hosts a Node Agents SDK app.

Which app: the agent factory named by `CRASHMATRIX_OPENAI_AGENTS_JS_APP=FILE:EXPORT` (FILE
relative to the directory crashmatrix runs in; the same file exports `openSession(dir)`, the
app's own session), else the shipped example (`examples/openai_agents_js_app`, `agent.mjs:build`).
The app's project must have its packages installed (`npm ci` there).

The session's own module: `CRASHMATRIX_OPENAI_AGENTS_JS_SESSION=FILE:EXPORT` names the app's
`openSession` in a module that does not import the SDK (the example's: `session.mjs`), so a
recovery with nothing to run, and the store reader's `dump`, never load the SDK (docs/frameworks.md,
"Node start cost"); unset, the host loads the app for them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from types import MappingProxyType

from crashmatrix.harness.adapters.interface import Capability, LaunchSpec, pass_env_of
from crashmatrix.harness.records.agent_env import agent_environment
from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.integrations.node_hosting import (
    NodeHostedAdapter,
    absolute_ref,
    node_package_versions,
    node_program,
)
from crashmatrix.integrations.openai_agents_js import store
from crashmatrix.integrations.openai_agents_js.settings import (
    APP_ENV,
    DEFAULT_APP,
    EXAMPLE_DIR,
    HOST,
    QUIET_ENV,
)

SESSION_ENV = "CRASHMATRIX_OPENAI_AGENTS_JS_SESSION"  # FILE:EXPORT of the app's openSession, without the SDK
DEFAULT_SESSION = f"{EXAMPLE_DIR / 'session.mjs'}:openSession"  # what the example's agent.mjs re-exports


class OpenAIAgentsJsAdapter(NodeHostedAdapter):
    name = "openai-agents-js"
    program = node_program(HOST)
    host, app_env, default_app = str(HOST), APP_ENV, DEFAULT_APP
    example_dir, quiet_env = EXAMPLE_DIR, QUIET_ENV
    # kill and a store reader. Not `file-store`: the session is whatever the app brings.
    capabilities = frozenset({Capability.KILL, Capability.STORE})

    not_applicable = MappingProxyType({
        "intent-before-effect": "the Agents SDK saves a tool call only together with its output, "
                                "after the tool ran (no intent record): a crash in between makes "
                                "the restart run it again, which at-most-once and safe-rerun judge",
    })

    def profile(self) -> Profile:
        return Profile("OpenAI Agents JS", node_package_versions(self.app, "@openai/agents"),
                       "the app's Session (the example's: one JSON file, written whole)",
                       "run on the session again; an input with no saved answer is run again")

    def declared_branches(self) -> tuple[str, ...]:
        return ()  # the SDK reports no recovery decisions: a restart runs the input again

    @property
    def session_module(self) -> str | None:
        """FILE:EXPORT (FILE absolute) of the app's `openSession` in a module without the SDK: the
        example's, else the one the environment names; None when there is none to name."""
        if self.app == self.default_app:
            return DEFAULT_SESSION
        named = os.environ.get(SESSION_ENV)
        return absolute_ref(named) if named else None

    def env(self) -> dict[str, str]:
        env = super().env()
        session = self.session_module
        if session is not None:
            env[SESSION_ENV] = session  # absolute: an incarnation runs in its case's directory
        return env

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        env = {**agent_environment(os.environ, pass_env_of(self)), **self.env()}
        env.pop("CRASHMATRIX_PROBE", None)  # dump is no incarnation: it must not probe
        # On a copy: the app's own session code opens it, and an opener that writes (one that
        # truncates the file first, as a docs sample does) must not change what the next
        # incarnation finds.
        with tempfile.TemporaryDirectory(prefix="crashmatrix-dump-") as tmp:
            copy = Path(tmp) / "session"
            if Path(spec.session).is_dir():
                shutil.copytree(spec.session, copy, symlinks=True)
            else:
                copy.mkdir()
            command = (*self.program, *self._flags(), "dump", str(copy))
            items, error = store.dump(command, env, cwd=tmp)
        return store.transcript_of(items, error)


ADAPTER = OpenAIAgentsJsAdapter()  # registered as `openai-agents-js` in pyproject.toml
