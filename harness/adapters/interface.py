"""The adapter contract: how the harness starts an agent, restarts it, feeds it and reads it.

An adapter is any object with these attributes and methods, registered under the entry-point
group `crashmatrix.adapters` (see `crashmatrix.harness.plugins`) or named `module:attr` on the
command line. Its agent may be any program in any language (`program`); a Python agent may also
offer an entry point the zygote preloads and forks (`python`), which is much faster. What the
harness may do to or ask of the agent is declared in `capabilities`, never guessed: a scenario or
a fault that needs a capability the adapter lacks is refused with a usage error. This module
imports nothing of the harness but the records it returns.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.transcript import Transcript


class Capability(StrEnum):
    """What an adapter lets the harness do to its agent; fault kinds name what they need."""

    KILL = "kill"  # the agent runs as a process the harness may SIGKILL (every adapter)
    TEAR = "tear"  # `tear` cuts the store's last write short, as a crash mid-write leaves it
    INBOX = "inbox"  # `deliver` drops inputs and cancels into a durable inbox the agent polls
    STORE = "store"  # `read_transcript` reads the agent's store into the canonical transcript
    # A second incarnation may be started on the session while the first is alive but stopped
    # (SIGSTOP of its group): the agent is expected to refuse it. Nothing more than
    # `recover_args` is needed; declared, not assumed, because an agent that cannot share its
    # host with a second copy (a fixed port, one container) would fail for another reason.
    CONCURRENT = "concurrent"
    # The agent's store is files under the session directory (`LaunchSpec.session`), written by
    # the agent's own process and children: a power loss can be modelled on them (fault `power`).
    # Not so for a store in a database server, or one a daemon writes.
    FILE_STORE = "file-store"
    # Everything the agent's recovery reads is in the case tree (session directory and workspace)
    # or the provider's replies, and it is a function of them: no clock, no randomness, no state
    # elsewhere. Crash cases may then start from a recorded crash state, and cases whose states
    # are byte-identical share one recovery (`run --states`).
    STATE_IN_TREE = "state-in-tree"
    # The agent is told `[agent] max_steps` (`LaunchSpec.max_steps`) and ends a run chain at that
    # many model replies. A scenario that sets it expects that end: an agent that is not told the
    # limit (a framework app, which has its own) would be judged against a limit it never had.
    STEP_LIMIT = "step-limit"


class ToolPolicy(StrEnum):
    """What re-running a tool does to the world, as the agent (or the scenario) declares it.

    The scenario format's `Policy` is this vocabulary plus the reference agent's older `safe`
    (docs/scenarios.md, "Tool policies", says how they map)."""

    READ_ONLY = "read-only"  # no effect at all: re-running it is never a violation
    IDEMPOTENT = "idempotent"  # a repeat is allowed when the world shows one effect
    NEVER = "never"  # an effect that must not happen twice (the default for any tool)
    # The reference agent's own word: a call it recorded safe may be re-run (its `read`).
    SAFE = "safe"


@dataclass(frozen=True)
class ToolSpec:
    """One tool the agent under test has: its name, the JSON Schema of its arguments object
    (None: not known), its replay policy where the agent knows it, and its description."""

    name: str
    parameters: Mapping[str, Any] | None = None
    policy: ToolPolicy | None = None
    description: str = ""


class PreflightError(RuntimeError):
    """The agent cannot be started at all (its adapter or its app does not load): a usage error,
    exit 2, whose message carries the cause (a traceback, when there is one)."""


@dataclass(frozen=True)
class PythonEntry:
    """A Python agent the zygote can import once and fork: `python -m MODULE ARGS` in fresh mode,
    `ENTRY(ARGS)` (returning the exit code) in a forked child."""

    module: str
    entry: str  # "package.module:function"
    preload: tuple[str, ...] = ()  # modules the zygote imports before it forks
    # The package whose lines --line-coverage measures; None: the top-level package of `module`
    # (a user's agent is usually one package; ours lives inside crashmatrix, so it names its own).
    coverage_source: str | None = None

    @property
    def measured(self) -> str:
        return self.coverage_source or self.module.partition(".")[0]


@dataclass(frozen=True)
class LaunchSpec:
    """What one incarnation needs: where, which provider, and the policies in force now."""

    session: Path
    workspace: Path
    provider_url: str
    tools: Sequence[str]
    policies: Mapping[str, str]  # tool -> safe|never overrides for this incarnation
    resume_budget: int
    max_retries: int
    retry_delay_s: float
    provider_timeout_s: float
    fsync: bool
    # Model replies a run chain may have (`[agent] max_steps`); an adapter whose agent takes no
    # such setting ignores it, as it ignores resume_budget and max_retries.
    max_steps: int = 100
    # The downstream services of the scenario: environment variable -> base URL, given to every
    # incarnation (and whatever it starts) on top of the adapter's `env()` (docs/downstream.md).
    services: Mapping[str, str] = field(default_factory=dict)


class Adapter(Protocol):
    name: str
    # The command line an incarnation starts with; `start_args` or `recover_args` follow it.
    # Any executable: ("node", "/abs/agent.js"), or (sys.executable, "-m", "pkg") for Python.
    program: tuple[str, ...]
    python: PythonEntry | None  # set when the agent can be forked from the zygote
    capabilities: frozenset[Capability]

    def start_args(self, spec: LaunchSpec, task: str) -> list[str]: ...

    def recover_args(self, spec: LaunchSpec) -> list[str]: ...

    def deliver(self, spec: LaunchSpec, kind: str, item_id: str, text: str) -> None:
        """With INBOX: drop an input (kind "input") or a cancel into the agent's durable inbox."""
        ...

    def env(self) -> dict[str, str]:
        """Extra environment for every incarnation. The harness's own environment reaches an
        agent allow-listed only (records/agent_env.py); an adapter whose agent needs more names
        them in an optional `pass_env` attribute (a tuple of names, `pass_env_of`)."""
        ...

    def tear(self, spec: LaunchSpec) -> None:
        """With TEAR: tear the store's last write, as a crash in the middle of it would (the
        agent is dead)."""
        ...

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        """With STORE: the agent's store as the canonical transcript."""
        ...

    def declared_branches(self) -> tuple[str, ...]:
        """The recovery branches the agent reports (`recovery.branch` events); () if none."""
        ...

    # Optional (read with getattr; `declared_tools_of` below): the agent's tools, or None when the
    # adapter does not know them (then a scenario's tools are taken on trust). Raises
    # PreflightError when finding them shows the agent cannot start (an app that does not import).
    #   def declared_tools(self) -> Sequence[ToolSpec] | None: ...

    # Optional (read with getattr; `profile_of` below): what a durability table says of the agent
    # in its row (framework and version, store, restart rule).
    #   def profile(self) -> Profile: ...

    # Optional (read with getattr, default {}): invariant id -> why it does not apply to this
    # agent, e.g. {"intent-before-effect": "the framework records no intent before a tool runs"}.
    # Reported as not applicable with that reason, never as held, and not judged. For a promise
    # the agent's design does not make, not for one it breaks: a declared exemption is printed
    # in every summary, so a reader can judge it.


def profile_of(adapter: object) -> Profile | None:
    """The adapter's `profile()`, or None when it offers none. One that raises is said in the
    row (a table written after every matrix ran must not be lost to it)."""
    method = getattr(adapter, "profile", None)
    if method is None:
        return None
    try:
        found = method()
    except Exception as exc:
        return Profile(str(getattr(adapter, "name", "?")), f"unknown: profile() raised "
                       f"{type(exc).__name__}: {exc}", "", "")
    return found if isinstance(found, Profile) else None


def python_program(module: str) -> tuple[str, ...]:
    """`program` for a Python agent run as `python -m MODULE` by the harness's interpreter."""
    return (sys.executable, "-m", module)


def pass_env_of(adapter: object) -> tuple[str, ...]:
    """The names of the harness's environment the adapter passes to its agent beyond the
    allow-list (its optional `pass_env`); () when it names none."""
    return tuple(getattr(adapter, "pass_env", ()) or ())


def declared_tools_of(adapter: object) -> tuple[ToolSpec, ...] | None:
    """The tools `adapter` declares (its optional `declared_tools`), or None when it declares none."""
    method = getattr(adapter, "declared_tools", None)
    if method is None:
        return None
    tools = method()
    return None if tools is None else tuple(tools)


@dataclass(frozen=True)
class CommandOutcome:
    """How a one-off command of an adapter's program ended (`forked_command`)."""

    code: int | None  # its exit code; None: it ran past its deadline, and was killed and reaped
    output: str  # what it wrote to stdout and stderr, in one stream


# (preload, entry, args, env, cwd, timeout_s) -> the outcome, or None: no zygote for it.
ForkedCommand = Callable[[tuple[str, ...], str, list[str], dict[str, str], Path, float],
                         "CommandOutcome | None"]
# Set by a command that forks its incarnations from a zygote (harness/execution/warm_zygotes.py);
# a context variable, so a thread of the adapter's own never sees it.
FORKED_COMMAND: ContextVar[ForkedCommand | None] = ContextVar("crashmatrix_forked_command", default=None)


def forked_command(preload: tuple[str, ...], entry: str, args: list[str], env: dict[str, str],
                   cwd: Path, timeout_s: float) -> CommandOutcome | None:
    """Run `entry(args)` once to its end in a child of a zygote that preloaded `preload`, when the
    command using the adapter keeps one for its run; None when it does not (the adapter then
    starts a fresh process, as before). For a Python adapter's own preflight (the framework
    integrations' `describe`), which would otherwise import a framework the zygote imports again."""
    runner = FORKED_COMMAND.get()
    return None if runner is None else runner(preload, entry, args, env, cwd, timeout_s)
