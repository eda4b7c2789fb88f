"""The scenario data model: frozen dataclasses and the closed vocabularies they use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType


class ToolName(StrEnum):
    """The agent's built-in tools (DESIGN 3.5)."""

    READ = "read"
    APPEND_NOTE = "append_note"
    WRITE = "write"
    EDIT = "edit"
    BASH = "bash"
    STOP_RUN = "stop_run"


# Required arguments of each tool, all strings; mirrors the agent's schemas so a script that
# would be refused by the agent is refused at load time instead.
TOOL_ARGS: Mapping[ToolName, tuple[str, ...]] = MappingProxyType({
    ToolName.READ: ("path",),
    ToolName.APPEND_NOTE: ("path", "line"),
    ToolName.WRITE: ("path", "content"),
    ToolName.EDIT: ("path", "old", "new"),
    ToolName.BASH: ("command",),
    ToolName.STOP_RUN: ("reason",),
})


class Policy(StrEnum):
    """Replay policy: may recovery re-run an interrupted call of this tool?"""

    SAFE = "safe"
    NEVER = "never"


# The agent's registered policies when a scenario overrides nothing.
DEFAULT_POLICIES: Mapping[ToolName, Policy] = MappingProxyType({
    t: (Policy.SAFE if t is ToolName.READ else Policy.NEVER) for t in ToolName
})


class Outcome(StrEnum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    ABORTED = "aborted"
    FAILED = "failed"


class FaultKind(StrEnum):
    HTTP_500 = "http_500"
    HTTP_429 = "http_429"
    TIMEOUT = "timeout"  # hold the response past the client's timeout, then close
    DROP = "drop"  # read the request, close the connection without a response


class ResultStatus(StrEnum):
    """What a tool result shows, judged from its text alone (that is all the wire carries)."""

    NONE = "none"  # no result for this key (yet)
    OK = "ok"  # a result that is neither an error nor an unknown outcome
    ERROR = "error"  # starts with "ERROR: " and is not an unknown outcome
    UNKNOWN = "unknown"  # contains the unknown-outcome marker
    ANY = "any"  # any result at all (ok, error or unknown)


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class BoundaryKind(StrEnum):
    """Probe event kinds (DESIGN 3.7); duplicated here because scenarios never import agent."""

    COMMIT_BEFORE = "commit.before"
    COMMIT_WRITTEN = "commit.written"
    COMMIT_AFTER = "commit.after"
    EFFECT_BEFORE = "effect.before"
    EFFECT_AFTER = "effect.after"
    PROVIDER_BEFORE = "provider.before"
    PROVIDER_AFTER = "provider.after"
    INBOX_POLL = "inbox.poll"
    RECOVERY_BRANCH = "recovery.branch"


@dataclass(frozen=True)
class Boundary:
    """A named probe event, written `kind:label` (label omitted: any label)."""

    kind: BoundaryKind
    label: str | None = None

    def matches(self, kind: str, label: str) -> bool:
        return kind == self.kind.value and (self.label is None or label == self.label)

    def __str__(self) -> str:
        return self.kind.value if self.label is None else f"{self.kind.value}:{self.label}"


@dataclass(frozen=True)
class ResultKey:
    """Which results a condition looks at: a tool, optionally narrowed to one `path` argument."""

    tool: ToolName
    path: str | None = None

    def __str__(self) -> str:
        return self.tool.value if self.path is None else f"{self.tool.value}:{self.path}"


def _frozen_map() -> Mapping[ResultKey, frozenset[ResultStatus]]:
    return MappingProxyType({})


def _frozen_text_map() -> Mapping[ResultKey, str]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Condition:
    """A conjunction of tests over the conversation; an empty condition always holds."""

    results: Mapping[ResultKey, frozenset[ResultStatus]] = field(default_factory=_frozen_map)
    last_turn: Mapping[ResultKey, frozenset[ResultStatus]] = field(default_factory=_frozen_map)
    contains: Mapping[ResultKey, str] = field(default_factory=_frozen_text_map)
    lacks: Mapping[ResultKey, str] = field(default_factory=_frozen_text_map)
    user_contains: str | None = None
    user_lacks: str | None = None
    last_role: Role | None = None
    turns: int | None = None
    min_turns: int | None = None
    max_turns: int | None = None


@dataclass(frozen=True)
class CallSpec:
    tool: ToolName
    args: Mapping[str, str]


@dataclass(frozen=True)
class Reply:
    """Tool calls (with optional text), or a final answer when `tool_calls` is empty."""

    text: str | None
    tool_calls: tuple[CallSpec, ...] = ()

    @property
    def is_final(self) -> bool:
        return not self.tool_calls


@dataclass(frozen=True)
class Rule:
    name: str
    when: Condition
    reply: Reply


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    when: Condition
    times: int = 1
    hold_s: float = 6.0  # timeout faults only: how long to hold before closing


@dataclass(frozen=True)
class Input:
    """A user input the harness drops into the inbox when the agent first reaches `at`."""

    id: str
    text: str
    at: Boundary


@dataclass(frozen=True)
class Cancel:
    """A cancel request the harness drops into the inbox when the agent first reaches `at`."""

    id: str
    at: Boundary


@dataclass(frozen=True)
class Tools:
    enabled: tuple[ToolName, ...]
    policies: Mapping[ToolName, Policy]  # overrides at the first start
    restart_policies: Mapping[ToolName, Policy]  # overrides for every restart/recovery

    def overrides_at(self, *, restart: bool) -> dict[ToolName, Policy]:
        """Policy overrides for an incarnation; restart_policies layer on top of policies."""
        merged = dict(self.policies)
        if restart:
            merged.update(self.restart_policies)
        return merged

    def policies_at(self, *, restart: bool) -> dict[ToolName, Policy]:
        """The full effective policy of every enabled tool for an incarnation."""
        overrides = self.overrides_at(restart=restart)
        return {t: overrides.get(t, DEFAULT_POLICIES[t]) for t in self.enabled}


@dataclass(frozen=True)
class AgentSettings:
    resume_budget: int = 3
    max_retries: int = 3
    retry_delay_s: float = 0.0
    provider_timeout_s: float = 5.0


@dataclass(frozen=True)
class MatrixSettings:
    """How the harness schedules crashes for this scenario, beyond the run's --depth.

    `crash_loop = N` adds, for every single-crash case, a schedule that crashes again at the same
    boundary in each of the next N-1 incarnations: an agent that keeps dying at the same step.
    `max_depth = N` caps how many crashes a schedule of this scenario may hold, whatever --depth
    asks, for a scenario whose expectation only holds up to N crashes (its file says why).
    """

    crash_loop: int = 1
    max_depth: int | None = None


class CallIds(StrEnum):
    """How the fake numbers the tool calls of a reply."""

    HISTORY = "history"  # `call_<k>`, k counting the calls already in the history: unique
    # `call_0`, `call_1`, ... in every reply, as some providers do: ids repeat across turns and
    # runs, so an agent must match results to calls within a turn, not across the session.
    PER_RESPONSE = "per-response"


@dataclass(frozen=True)
class ProviderSettings:
    unknown_marker: str = "outcome is unknown"
    call_ids: CallIds = CallIds.HISTORY


def count_lines(text: str | None, line: str) -> int:
    """How many lines of `text` equal `line` exactly (a missing file has none)."""
    if text is None:
        return 0
    return sum(1 for got in text.splitlines() if got == line)


@dataclass(frozen=True)
class LineRule:
    """How many times one exact line may appear in a workspace file at the end."""

    path: str
    line: str
    min: int = 0
    max: int | None = None
    extra_per_crash: int = 0
    missing_ok_if_crash_before: Boundary | None = None

    def accepts(self, count: int, *, crashes: int, boundary_reached: bool) -> bool:
        """Judge a final count given the case's crash count and whether any incarnation
        reported the `missing_ok_if_crash_before` event (for the verifier)."""
        if (
            count == 0
            and self.missing_ok_if_crash_before is not None
            and crashes > 0
            and not boundary_reached
        ):
            return True
        high = None if self.max is None else self.max + self.extra_per_crash * crashes
        return count >= self.min and (high is None or count <= high)


@dataclass(frozen=True)
class Expect:
    outcome: tuple[Outcome, ...] = (Outcome.COMPLETED,)
    final_answer_contains: tuple[str, ...] = ()
    files: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    lines: tuple[LineRule, ...] = ()


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str  # the file it was loaded from
    description: str
    task: str
    workspace: Mapping[str, str]
    tools: Tools
    agent: AgentSettings
    provider: ProviderSettings
    script: tuple[Rule, ...]
    faults: tuple[Fault, ...] = ()
    inputs: tuple[Input, ...] = ()
    cancels: tuple[Cancel, ...] = ()
    expect: Expect = field(default_factory=Expect)
    matrix: MatrixSettings = field(default_factory=MatrixSettings)
