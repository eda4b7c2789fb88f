"""The scenario model, declared once: frozen msgspec Structs that are also the file format.

Every Struct field is a key of the TOML file, spelled as the file spells it, with its type,
default, constraints and description; the loader (`schema.py`) decodes straight into these
types, and the JSON Schema (`jsonschema.py`) and the reference in docs/scenarios.md derive from
them. Rules that a type cannot express (tool arguments, placeholders, `kind:label` boundaries,
cross-references) are `__post_init__` checks on the type they belong to; they raise `FieldError`
so the loader can name the field. Constraints written as `Meta` apply when a file is decoded;
`__post_init__` checks also hold for scenarios built in code (the explorer's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from enum import Enum, StrEnum
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal

import msgspec
from msgspec import Meta
from msgspec.structs import force_setattr, replace

from crashmatrix.scenarios import template


class FieldError(ValueError):
    """A rule broken inside a value; `at` is where, relative to the value being checked.

    msgspec turns a ValueError raised while decoding into a ValidationError at the value's path
    and keeps this exception as its cause, so the loader appends `at` to that path.
    """

    def __init__(self, message: str, *at: str | int, missing: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.at = at
        self.missing = missing  # a required key is absent: the loader says what it expects


class ToolName(StrEnum):
    """The reference agent's workspace tools (crashmatrix.agent.tools), a scenario's default tool
    set. A scenario may name any tool the agent under test has (the reference agent's post_json
    too, for downstream services); these names keep the reference schemas below, so a script
    that the reference agent would refuse is refused at load time."""

    READ = "read"
    APPEND_NOTE = "append_note"
    WRITE = "write"
    EDIT = "edit"
    BASH = "bash"
    STOP_RUN = "stop_run"


# Required arguments of each reference tool, all strings; mirrors the agent's schemas so a script
# that would be refused by the agent is refused at load time instead.
TOOL_ARGS: Mapping[ToolName, tuple[str, ...]] = MappingProxyType({
    ToolName.READ: ("path",),
    ToolName.APPEND_NOTE: ("path", "line"),
    ToolName.WRITE: ("path", "content"),
    ToolName.EDIT: ("path", "old", "new"),
    ToolName.BASH: ("command",),
    ToolName.STOP_RUN: ("reason",),
})


# A tool's name as a scenario writes it: what function-calling APIs accept (OpenAI: letters,
# digits, '_' and '-', at most 64).
TOOL_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)


def tool_name(value: str) -> str:
    """`value` if it can name a tool, else FieldError."""
    if not _TOOL_NAME.match(value):
        raise FieldError(f"{value!r} is not a tool name (letters, digits, '_' and '-', at most 64)")
    return value


AnyTool = Annotated[str, Meta(pattern=TOOL_NAME_PATTERN, description=(
    "a tool's name: letters, digits, '_' and '-', at most 64"))]


class Policy(StrEnum):
    """Replay policy: may recovery re-run an interrupted call of this tool, and what does a repeat
    mean? (docs/scenarios.md, "Tool policies".)"""

    SAFE = "safe"  # the reference agent's word: a call recorded safe may be re-run
    NEVER = "never"  # an effect that must not happen twice: the default for any tool
    READ_ONLY = "read-only"  # no effect: re-running it is never a violation
    IDEMPOTENT = "idempotent"  # a repeat is allowed when the world shows one effect

    @property
    def rerunnable(self) -> bool:
        """Whether recovery may run a call of this tool again."""
        return self is not Policy.NEVER

    @property
    def replay(self) -> str:
        """What the reference agent registers for it (its own vocabulary is safe | never)."""
        return "never" if self is Policy.NEVER else "safe"


# The reference agent's registered policies when a scenario overrides nothing; any other tool
# is `never` unless the scenario or the agent's adapter says otherwise.
DEFAULT_POLICIES: Mapping[str, Policy] = MappingProxyType({
    t: (Policy.SAFE if t is ToolName.READ else Policy.NEVER) for t in ToolName
})


def default_policy(tool: str, declared: Mapping[str, Policy] | None = None) -> Policy:
    """A tool's policy when the scenario sets none: what the agent's adapter declares for it; for
    an agent that declares no policies at all (`declared` None or empty), the reference agent's
    default for a reference tool's name; else never. (A framework app's own `read` is not our
    agent's: it gets no `safe` it never asked for.)"""
    if declared:
        return declared.get(tool, Policy.NEVER)
    return DEFAULT_POLICIES.get(tool, Policy.NEVER)


class Outcome(StrEnum):
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    ABORTED = "aborted"
    FAILED = "failed"


class ProviderFault(StrEnum):
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
    """Probe event kinds (docs/probe-protocol.md); duplicated here because scenarios never import agent."""

    COMMIT_BEFORE = "commit.before"
    COMMIT_WRITTEN = "commit.written"
    COMMIT_AFTER = "commit.after"
    EFFECT_BEFORE = "effect.before"
    EFFECT_AFTER = "effect.after"
    PROVIDER_BEFORE = "provider.before"
    PROVIDER_AFTER = "provider.after"
    INBOX_POLL = "inbox.poll"
    RECOVERY_BRANCH = "recovery.branch"


class CallIds(StrEnum):
    """How the fake numbers the tool calls of a reply."""

    HISTORY = "history"  # `call_<k>`, k counting the calls already in the history: unique
    # `call_0`, `call_1`, ... in every reply, as some providers do: ids repeat across turns and
    # runs, so an agent must match results to calls within a turn, not across the session.
    PER_RESPONSE = "per-response"
    # A new id in every response, as real services give them: `call_<k>`, k counting the calls
    # the fake has answered in the case. A history asked again (after a crash) gets new ids, so
    # an agent that keys a downstream request on the call id is seen re-keying it.
    FRESH = "fresh"


# What each closed vocabulary is called in an error message ("unknown tool 'rm'; ...").
ENUM_NOUNS: Mapping[type[Enum], str] = MappingProxyType({
    ToolName: "tool", Policy: "policy", Outcome: "outcome", ProviderFault: "fault kind",
    ResultStatus: "result status", Role: "role", BoundaryKind: "probe kind",
    CallIds: "call id scheme",
})


def unknown_value(enum: type[Enum], value: object) -> str:
    """The error message for a value outside a closed vocabulary."""
    choices = ", ".join(e.value for e in enum)
    return f"unknown {ENUM_NOUNS.get(enum, 'value')} {value!r}; expected one of {choices}"


def relative_path(value: str) -> str:
    """`value` normalised (`./a//b` is `a/b`), or FieldError unless it stays inside the workspace."""
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts or value.strip() != value or not p.parts:
        raise FieldError(f"{value!r} must be a relative path inside the workspace")
    return str(p)


# -- values written as strings: decoded by the loader's dec_hook through `parse` ---------------

class _StringValue:
    """An immutable value the file writes as one string (so msgspec hands it to the dec_hook).

    Not a dataclass or Struct on purpose: msgspec would then expect a table in the file.
    Equality, hashing, repr and pickling follow the fields named in `__slots__`, in order: a
    subclass lists them in the order its `__init__` takes them.
    """

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __repr__(self) -> str:
        args = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _StringValue) and type(other) is type(self)
                and self._fields() == other._fields())

    def __hash__(self) -> int:
        return hash((type(self), self._fields()))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; cannot set {name!r}")

    def __reduce__(self) -> tuple[type[_StringValue], tuple[object, ...]]:
        return (type(self), self._fields())


class Boundary(_StringValue):
    """A named probe event, written `kind:label` (label omitted: any label)."""

    __slots__ = ("kind", "label")
    kind: BoundaryKind
    label: str | None
    # What the file holds here, for error messages and the JSON Schema.
    expected: ClassVar[str] = 'a probe boundary "kind:label" such as "effect.after:append_note"'
    json_schema: ClassVar[dict[str, Any]] = {
        "type": "string",
        "pattern": "^(" + "|".join(k.value.replace(".", r"\.") for k in BoundaryKind) + ")(:.+)?$",
    }

    def __init__(self, kind: BoundaryKind, label: str | None = None) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "label", label)

    @classmethod
    def parse(cls, text: str) -> Boundary:
        kind_text, sep, label = text.partition(":")
        try:
            kind = BoundaryKind(kind_text)
        except ValueError:
            raise FieldError(unknown_value(BoundaryKind, kind_text)) from None
        if sep and not label:
            raise FieldError(f"{text!r} has an empty label; write {kind.value!r} to match any label")
        return cls(kind, label if sep else None)

    def matches(self, kind: str, label: str) -> bool:
        return kind == self.kind.value and (self.label is None or label == self.label)

    def __str__(self) -> str:
        return self.kind.value if self.label is None else f"{self.kind.value}:{self.label}"


class ResultKey(_StringValue):
    """Which results a condition looks at: a tool, optionally narrowed to one `path` argument."""

    __slots__ = ("tool", "path")  # noqa: RUF023 - the order __init__ takes them (see _StringValue)
    tool: str
    path: str | None
    expected: ClassVar[str] = 'a result key: a tool name, or "tool:path" such as "read:CHANGELOG.md"'
    json_schema: ClassVar[dict[str, Any]] = {
        "type": "string",
        "pattern": r"^[A-Za-z0-9_-]{1,64}(:.+)?$",
    }

    def __init__(self, tool: str, path: str | None = None) -> None:
        object.__setattr__(self, "tool", tool)
        object.__setattr__(self, "path", path)

    @classmethod
    def parse(cls, text: str) -> ResultKey:
        tool_text, sep, path = text.partition(":")
        tool = tool_name(tool_text)
        if not sep:
            return cls(tool)
        return cls(tool, relative_path(path))

    def __str__(self) -> str:
        return self.tool if self.path is None else f"{self.tool}:{self.path}"


# A file may write one value or an array where the model holds a collection (`outcome =
# "completed"`). To the type checker these are the plain collections the rest of the code builds
# and reads; at run time they are subclasses the loader's dec_hook recognises by `item`.
if TYPE_CHECKING:
    Statuses = frozenset[ResultStatus]
    Outcomes = tuple[Outcome, ...]
    Phrases = tuple[str, ...]
else:
    class Statuses(frozenset):
        """One result status or a non-empty array of them (any of)."""

        item = ResultStatus

    class Outcomes(tuple):
        """One outcome or a non-empty array of them (any of)."""

        item = Outcome

    class Phrases(tuple):
        """One non-empty string or a non-empty array of them (all of)."""

        item = str


# -- Structs ----------------------------------------------------------------------------------

class Table(msgspec.Struct, frozen=True, forbid_unknown_fields=True, repr_omit_defaults=True):
    """A table of the scenario file: unknown keys are errors, so typos never pass silently."""


def _frozen(mapping: Mapping[Any, Any]) -> MappingProxyType[Any, Any]:
    return mapping if isinstance(mapping, MappingProxyType) else MappingProxyType(dict(mapping))


def _freeze(obj: msgspec.Struct, *names: str) -> None:
    # Decoded tables are dicts; the model's mappings are read-only views, as scenarios are shared.
    for name in names:
        force_setattr(obj, name, _frozen(getattr(obj, name)))


def _keys_parsed(mapping: Mapping[Any, Any], name: str) -> dict[Any, Any]:
    """`mapping` with its keys as ResultKeys. msgspec's `convert` hands a custom-typed dict key
    to the dec_hook only from 0.23 on (`json.decode` always does); agent-framework-core pins
    msgspec below 0.23, so a key may arrive as the file's string, and is parsed here."""
    out = {}
    for key, value in mapping.items():
        try:
            parsed = ResultKey.parse(key) if isinstance(key, str) else key
        except FieldError as exc:
            raise FieldError(exc.message, name, key) from None
        out[parsed] = value
    return out


NonEmpty = Annotated[str, Meta(pattern=r"\S")]  # at least one non-blank character
Count = Annotated[int, Meta(ge=0)]
TurnCount = Annotated[int, Meta(ge=0, description="a number of assistant messages")]


class Condition(Table, frozen=True):
    """A conjunction of tests over the conversation; an empty condition always holds."""

    results: Annotated[Mapping[ResultKey, Statuses], Meta(description=(
        "KEY = status(es): the latest result for KEY anywhere in the history has one of them"
    ))] = {}
    last_turn: Annotated[Mapping[ResultKey, Statuses], Meta(description=(
        "KEY = status(es): the same, among the results of the latest assistant message that made "
        "tool calls ('none' if it made no such call); use it to react to what just happened"
    ))] = {}
    contains: Annotated[Mapping[ResultKey, NonEmpty], Meta(description=(
        'KEY = "text": the latest result for KEY exists and contains the text'
    ))] = {}
    lacks: Annotated[Mapping[ResultKey, NonEmpty], Meta(description=(
        'KEY = "text": there is no result for KEY, or the latest one lacks the text'
    ))] = {}
    user_contains: Annotated[NonEmpty | None, Meta(description=(
        "some user message (the task or a queued input) contains the text"
    ))] = None
    user_lacks: Annotated[NonEmpty | None, Meta(description="no user message contains the text")] = None
    last_role: Annotated[Role | None, Meta(description="the last non-system message has this role")] = None
    turns: Annotated[Count | None, Meta(description="the history holds exactly N assistant messages")] = None
    min_turns: Annotated[Count | None, Meta(description=(
        "the history holds at least N assistant messages"))] = None
    max_turns: Annotated[Count | None, Meta(description=(
        "the history holds at most N assistant messages"))] = None

    def __post_init__(self) -> None:
        for name in ("results", "last_turn", "contains", "lacks"):
            force_setattr(self, name, _keys_parsed(getattr(self, name), name))
        _freeze(self, "results", "last_turn", "contains", "lacks")
        if self.min_turns is not None and self.max_turns is not None and self.min_turns > self.max_turns:
            raise FieldError(f"must be >= min_turns ({self.min_turns})", "max_turns")


class CallSpec(Table, frozen=True):
    """One tool call of a reply."""

    noun: ClassVar[str] = "tool call"  # for "expected at least one tool call"

    tool: Annotated[AnyTool, Meta(description=(
        "the tool to call, by the name the agent under test gives it; it must be enabled in [tools]"
    ))]
    args: Annotated[Mapping[str, Any], Meta(description=(
        "the call's arguments, a JSON object, checked against the schema of the agent's tool "
        "when the matrix starts (our reference agent: read path; append_note path, line; write "
        "path, content; edit path, old, new; bash command; stop_run reason, all strings)"
    ))]

    def __post_init__(self) -> None:
        _freeze(self, "args")
        # The agent is not known yet: the schema of its tool is checked when the matrix starts
        # (harness/adapters/tools.py). What no JSON can carry is refused here.
        for k, v in self.args.items():
            problem = _not_json(v)
            if problem is not None:
                raise FieldError(problem, "args", k)


def _not_json(value: Any) -> str | None:
    """Why `value` (from TOML) is no JSON value: dates and times have no JSON form."""
    if isinstance(value, str | bool | int | float) or value is None:
        if isinstance(value, float) and value != value:  # noqa: PLR0124 - NaN is not equal to itself
            return "nan is not a JSON number"
        return None
    if isinstance(value, list | tuple):
        return next((p for p in map(_not_json, value) if p is not None), None)
    if isinstance(value, Mapping):
        return next((p for p in map(_not_json, value.values()) if p is not None), None)
    return f"a TOML {type(value).__name__} has no JSON form; write it as a string"


def _check_template(text: str | None, at: str) -> None:
    if text is None:
        return
    for ph in template.placeholders(text):
        try:
            ResultKey.parse(ph.key)
        except FieldError as exc:
            raise FieldError(exc.message, at) from None
    if template.near_misses(text):
        raise FieldError("malformed placeholder; expected {result.KEY} or {last_line.KEY}, "
                         "e.g. {last_line.bash}", at)


class Reply(Table, frozen=True):
    """Tool calls (with optional text), or a final answer when `tool_calls` is empty.

    Written `final = "..."` for a final answer, or `tool_calls = [...]` with an optional
    `content`; `text` is whichever text the reply carries.
    """

    final: Annotated[NonEmpty | None, Meta(description=(
        "a final answer (no tool calls); may use {result.KEY} and {last_line.KEY} placeholders"
    ))] = None
    tool_calls: Annotated[tuple[CallSpec, ...], Meta(min_length=1, description=(
        "the tool calls, each { tool, args }; exactly one of final and tool_calls is given"
    ))] = ()
    content: Annotated[NonEmpty | None, Meta(description=(
        "text alongside the tool calls; may use placeholders like final"
    ))] = None

    def __post_init__(self) -> None:
        if (self.final is None) == (not self.tool_calls):
            raise FieldError("expected exactly one of 'final' (a final answer) or 'tool_calls' "
                             "(a non-empty array)")
        if self.final is not None and self.content is not None:
            raise FieldError("'content' goes with 'tool_calls'; a final answer is 'final'", "content")
        _check_template(self.final, "final")
        _check_template(self.content, "content")

    @property
    def text(self) -> str | None:
        return self.final if self.final is not None else self.content

    @property
    def is_final(self) -> bool:
        return not self.tool_calls


# Stands in for a rule's missing reply: Rule's positional fields (name, when, reply) need a
# default after two optional ones. Rule.__post_init__ refuses it, so no rule ever holds it.
_NO_REPLY: Final = Reply(final="")


class Rule(Table, frozen=True):
    """A script rule: the first rule whose `when` holds gives the reply."""

    name: Annotated[NonEmpty, Meta(description=(
        "shown in request records; unique within the script (default \"script[i]\")"
    ))] = ""
    when: Annotated[Condition, Meta(description="a condition; empty: always")] = (
        msgspec.field(default_factory=Condition))
    reply: Annotated[Reply, Meta(description="what the fake model answers")] = _NO_REPLY
    noun: ClassVar[str] = "rule"
    # Required in the file although the Struct has a default (see _NO_REPLY).
    required_keys: ClassVar[tuple[str, ...]] = ("reply",)

    def __post_init__(self) -> None:
        if self.reply is _NO_REPLY:
            raise FieldError("missing required field", "reply", missing=True)


# A timeout fault must end on its own even if nobody stops the server.
MAX_HOLD_S = 60.0
DEFAULT_HOLD_S = 6.0  # just past the default provider_timeout_s


class Fault(Table, frozen=True):
    """A scheduled provider fault."""

    kind: Annotated[ProviderFault, Meta(description="what the fake does instead of answering")]
    when: Annotated[Condition, Meta(description="a condition; empty: always")] = (
        msgspec.field(default_factory=Condition))
    times: Annotated[int, Meta(ge=1, description=(
        "fires on the first `times` matching requests of the case"
    ))] = 1
    # As written; None means just past the agent's timeout, which the Scenario fills in.
    hold: Annotated[Annotated[float, Meta(gt=0, le=MAX_HOLD_S)] | None, Meta(description=(
        "timeout faults only: seconds to hold the request before closing; "
        "default provider_timeout_s + 1, at most 60"
    ))] = msgspec.field(default=None, name="hold_s")

    def __post_init__(self) -> None:
        if self.hold is not None and self.kind is not ProviderFault.TIMEOUT:
            raise FieldError("only a 'timeout' fault holds the response", "hold_s")

    @property
    def hold_s(self) -> float:
        """How long a timeout fault holds the response."""
        return DEFAULT_HOLD_S if self.hold is None else self.hold


Id = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description=(
    "unique across inputs and cancels: letters, digits, '.', '_' and '-'"
))]
At = Annotated[Boundary, Meta(description=(
    "a probe boundary kind:label; the kind alone matches any label"
))]


class Input(Table, frozen=True):
    """A user input the harness drops into the inbox when the agent first reaches `at`."""

    id: Id
    text: Annotated[NonEmpty, Meta(description="the user's message")]
    at: At


class Cancel(Table, frozen=True):
    """A cancel request the harness drops into the inbox when the agent first reaches `at`."""

    id: Id
    at: At


PolicyMap = Annotated[Mapping[AnyTool, Policy], Meta(description=(
    'tool = "read-only" | "idempotent" | "never" | "safe"'))]


class Tools(Table, frozen=True):
    """The tools the agent registers and their replay policies."""

    enabled: Annotated[tuple[AnyTool, ...], Meta(min_length=1, description=(
        "the tools the scenario uses, by name: the reference agent registers exactly these; "
        "another agent must have each of them"
    ))] = tuple(ToolName)
    policies: Annotated[PolicyMap, Meta(description=(
        "policy overrides in force at the first start (defaults: the reference read safe, every "
        "other tool what the agent declares, else never)"
    ))] = {}
    restart_policies: Annotated[PolicyMap, Meta(description=(
        "policy overrides for every restart/recovery incarnation, layered on top of policies"
    ))] = {}

    def __post_init__(self) -> None:
        _freeze(self, "policies", "restart_policies")
        dupes = sorted({str(n) for n in self.enabled if self.enabled.count(n) > 1})
        if dupes:
            raise FieldError(f"duplicate tool(s): {', '.join(dupes)}", "enabled")
        enabled = ", ".join(self.enabled)
        for name in ("policies", "restart_policies"):
            for tool in getattr(self, name):
                if tool not in self.enabled:
                    raise FieldError(f"tool {tool!r} is not enabled; enabled: {enabled}", name, tool)

    def overrides_at(self, *, restart: bool) -> dict[str, Policy]:
        """Policy overrides for an incarnation; restart_policies layer on top of policies."""
        merged = dict(self.policies)
        if restart:
            merged.update(self.restart_policies)
        return merged

    def policies_at(self, *, restart: bool, declared: Mapping[str, Policy] | None = None
                    ) -> dict[str, Policy]:
        """The full effective policy of every enabled tool for an incarnation; `declared`: the
        policies the agent's adapter declares (for tools the scenario leaves to it)."""
        overrides = self.overrides_at(restart=restart)
        return {t: overrides.get(t, default_policy(t, declared)) for t in self.enabled}


class AgentSettings(Table, frozen=True):
    """Settings passed to the agent."""

    resume_budget: Annotated[int, Meta(ge=0, description=(
        "automatic resumes before the run is closed with a notice"
    ))] = 3
    max_retries: Annotated[int, Meta(ge=0, description=(
        "retries of one step (the requests that carry one history) after retryable provider "
        "failures; a failure after the last of them ends the run failed"
    ))] = 3
    retry_delay_s: Annotated[float, Meta(ge=0, description="seconds to wait before a retry")] = 0.0
    provider_timeout_s: Annotated[float, Meta(gt=0, description=(
        "the agent's HTTP timeout in seconds"
    ))] = 5.0
    max_steps: Annotated[int, Meta(ge=1, description=(
        "model replies a run may have, counted across the runs that resume it; reaching it ends "
        "the run failed without a further request"
    ))] = 100


class MatrixSettings(Table, frozen=True):
    """How the harness schedules crashes for this scenario, beyond the run's --depth.

    `crash_loop = N` adds, for every single-crash case, a schedule that crashes again at the same
    boundary in each of the next N-1 incarnations: an agent that keeps dying at the same step.
    `max_depth = N` caps how many crashes a schedule of this scenario may hold, whatever --depth
    asks, for a scenario whose expectation only holds up to N crashes (its file says why).
    """

    crash_loop: Annotated[int, Meta(ge=1, description=(
        "for every single-crash case, also crash again at the same boundary in each of the next "
        "N-1 incarnations (an agent that keeps dying at the same step)"
    ))] = 1
    max_depth: Annotated[Annotated[int, Meta(ge=1)] | None, Meta(description=(
        "cap the crashes per schedule at N whatever --depth asks, for a scenario whose "
        "expectation only holds up to N crashes (say why in the file)"
    ))] = None


class ProviderSettings(Table, frozen=True):
    """Settings of the fake provider."""

    unknown_marker: Annotated[NonEmpty, Meta(description=(
        "a tool result containing this text has status unknown"
    ))] = "outcome is unknown"
    call_ids: Annotated[CallIds, Meta(description=(
        "history: call_<k>, k counting the calls already in the history (unique ids); "
        "per-response: every reply numbers its calls from call_0, so ids repeat across turns; "
        "fresh: a new id in every response, as real services give them (a history asked again "
        "after a crash gets new ids)"
    ))] = CallIds.HISTORY


def count_lines(text: str | None, line: str) -> int:
    """How many lines of `text` equal `line` exactly (a missing file has none)."""
    if text is None:
        return 0
    return sum(1 for got in text.splitlines() if got == line)


def _fold_count(rule: Any) -> None:
    """`count = N` is shorthand for `min = max = N` (then None), so equal rules compare equal;
    a rule must bound something."""
    if rule.count is not None:
        if rule.min != 0 or rule.max is not None:
            raise FieldError("use either 'count' or 'min'/'max', not both", "count")
        force_setattr(rule, "min", rule.count)
        force_setattr(rule, "max", rule.count)
        force_setattr(rule, "count", None)
    if rule.max is None and rule.min == 0:
        # Also refuses a lone `min = 0`: such a rule would accept any count.
        raise FieldError("expected 'count', or 'min' (>= 1) and/or 'max'")
    if rule.max is not None and rule.max < rule.min:
        raise FieldError(f"must be >= min ({rule.min})", "max")


class LineRule(Table, frozen=True):
    """How many times one exact line may appear in a workspace file at the end.

    Written with `count = N` or with `min`/`max`; `count` is shorthand that construction folds
    into `min = max = N` (after which `count` is None), so equal rules compare equal.
    """

    path: Annotated[NonEmpty, Meta(description="a relative path in the workspace")]
    line: Annotated[NonEmpty, Meta(description="one line of text, counted as whole lines, exactly equal")]
    min: Annotated[int, Meta(ge=0, description="at least this many")] = 0
    max: Annotated[Count | None, Meta(description="at most this many (no max: no upper bound)")] = None
    extra_per_crash: Annotated[int, Meta(ge=0, description=(
        "max is raised by this for every crash in the case"
    ))] = 0
    missing_ok_if_crash_before: Annotated[Boundary | None, Meta(description=(
        "also accept a missing line when the case crashed and no incarnation ever reported this "
        "event (the effect it marks never happened)"
    ))] = None
    count: Annotated[Count | None, Meta(description="exactly this many: min = max = count")] = None

    def __post_init__(self) -> None:
        force_setattr(self, "path", _at(relative_path, self.path, "path"))
        if "\n" in self.line:
            raise FieldError("expected a single line (no newline)", "line")
        _fold_count(self)

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


def _at(check: Any, value: Any, *at: str | int) -> Any:
    """`check(value)`, with a FieldError moved to `at` (relative to the caller's value)."""
    try:
        return check(value)
    except FieldError as exc:
        raise FieldError(exc.message, *at, *exc.at) from None


Files = Annotated[Mapping[str, str], Meta(description="path = \"exact text\"")]


def _paths(files: Mapping[str, str], name: str) -> MappingProxyType[str, str]:
    return MappingProxyType({_at(relative_path, k, name, k): v for k, v in files.items()})


EffectTool = Annotated[AnyTool | None, Meta(description=(
    "the tool whose call makes one such effect: at-most-once counts the effects here, in the "
    "world, and charges each to that tool's calls"
))]


class PatternRule(Table, frozen=True):
    """How many lines of a workspace file may match a regular expression at the end."""

    path: Annotated[NonEmpty, Meta(description="a relative path in the workspace")]
    pattern: Annotated[NonEmpty, Meta(description=(
        "a Python regular expression, searched in each line (anchor it with ^...$ for whole lines)"
    ))]
    tool: EffectTool = None
    min: Annotated[int, Meta(ge=0, description="at least this many matching lines")] = 0
    max: Annotated[Count | None, Meta(description="at most this many (no max: no upper bound)")] = None
    count: Annotated[Count | None, Meta(description="exactly this many: min = max = count")] = None

    def __post_init__(self) -> None:
        force_setattr(self, "path", _at(relative_path, self.path, "path"))
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise FieldError(f"not a regular expression: {exc}", "pattern") from None
        _fold_count(self)

    def matches(self, text: str | None) -> list[int]:
        """The numbers of the lines of `text` that match (a missing file has none)."""
        regex = re.compile(self.pattern)
        return [k for k, line in enumerate((text or "").splitlines(), 1) if regex.search(line)]


Scalar = str | int | float | bool


class RecordRule(Table, frozen=True):
    """How many JSON records (one object per line, JSON Lines) of a workspace file may match
    given field values at the end: a sent email, a created ticket, an order."""

    path: Annotated[NonEmpty, Meta(description="a relative path in the workspace (JSON Lines)")]
    where: Annotated[Mapping[str, Scalar], Meta(description=(
        'field = value: a record matches when each field has exactly that value; a dotted field '
        '("customer.email") reaches into nested objects; empty: every record'
    ))] = {}
    tool: EffectTool = None
    min: Annotated[int, Meta(ge=0, description="at least this many matching records")] = 0
    max: Annotated[Count | None, Meta(description="at most this many (no max: no upper bound)")] = None
    count: Annotated[Count | None, Meta(description="exactly this many: min = max = count")] = None

    def __post_init__(self) -> None:
        force_setattr(self, "path", _at(relative_path, self.path, "path"))
        _freeze(self, "where")
        for field, value in self.where.items():
            if not field or "" in field.split("."):
                raise FieldError(f"{field!r} is not a field name (a dotted name has no empty part)",
                                 "where", field)
            problem = _not_json(value)
            if problem is not None:
                raise FieldError(problem, "where", field)
        _fold_count(self)

    def matches(self, text: str | None) -> list[int]:
        """The numbers of the lines of `text` holding a matching record; a line that is not a
        JSON object is no record (the oracle's count says what is missing)."""
        found = []
        for k, line in enumerate((text or "").splitlines(), 1):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and all(_has(record, f, v) for f, v in self.where.items()):
                found.append(k)
        return found

    def describe(self) -> str:
        """`outbox.jsonl records with to='ana@example.com'`, for messages."""
        where = ", ".join(f"{k}={v!r}" for k, v in self.where.items())
        return f"{self.path} records" + (f" with {where}" if where else "")


def _has(record: Mapping[str, Any], dotted: str, want: Scalar) -> bool:
    """Whether the record's dotted field holds `want`, compared as JSON compares (1 is not true)."""
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return False
        value = value[part]
    return bool(value == want and isinstance(value, bool) == isinstance(want, bool))


CheckRef = Annotated[str, Meta(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", description=(
    "module:function, imported from the scenario file's folder (then the current directory): "
    "called with the final workspace (path -> text) and the transcript, it returns the "
    "violations it finds, as messages"
))]


class Expect(Table, frozen=True):
    """The expected end state."""

    outcome: Annotated[Outcomes, Meta(description=(
        "the outcome of the session's last run; an array means any of them"
    ))] = (Outcome.COMPLETED,)
    final_answer_contains: Annotated[Phrases, Meta(description=(
        "substrings of the last run's final answer; checked only when the outcome is completed"
    ))] = ()
    turns: Annotated[Count | None, Meta(description=(
        "the history holds exactly N assistant messages (model replies) at the end: how far the "
        "run got, e.g. that it stopped exactly at its step limit"
    ))] = None
    files: Annotated[Files, Meta(description="files whose final content must be exactly this text")] = {}
    lines: Annotated[tuple[LineRule, ...], Meta(description=(
        "line-count rules; a missing file has 0 lines"
    ))] = ()
    patterns: Annotated[tuple[PatternRule, ...], Meta(description=(
        "rules on the lines matching a regular expression"
    ))] = ()
    records: Annotated[tuple[RecordRule, ...], Meta(description=(
        "rules on JSON-lines records matched by fields"
    ))] = ()
    applied: Annotated[Mapping[str, Annotated[int, Meta(ge=0)]], Meta(description=(
        "how many business operations each downstream service (by name) must have applied by "
        "the end, from the service's own record"))] = {}
    check: CheckRef | None = None

    def __post_init__(self) -> None:
        force_setattr(self, "files", _paths(self.files, "files"))

    @property
    def effect_rules(self) -> tuple[PatternRule | RecordRule, ...]:
        """The rules that name the tool making their effect: where at-most-once reads the world."""
        rules: tuple[PatternRule | RecordRule, ...] = (*self.patterns, *self.records)
        return tuple(r for r in rules if r.tool is not None)


DEDUP_PATTERN = r"^(none|header:[!#$%&'*+.^_`|~0-9A-Za-z-]+|body:[^\s.]+)$"


class Dedup(_StringValue):
    """How a downstream service recognises a repeated submission, written `header:NAME` (a request
    header, as Stripe's `Idempotency-Key`), `body:FIELD` (a field of the JSON body, as many order
    APIs' `client_order_id`) or `none` (every request is a new operation)."""

    __slots__ = ("where", "name")  # noqa: RUF023 - the order __init__ takes them (see _StringValue)
    where: str  # header | body | none
    name: str | None
    expected: ClassVar[str] = 'a dedup rule: "header:NAME", "body:FIELD" or "none"'
    json_schema: ClassVar[dict[str, Any]] = {"type": "string", "pattern": DEDUP_PATTERN}

    def __init__(self, where: str, name: str | None = None) -> None:
        object.__setattr__(self, "where", where)
        object.__setattr__(self, "name", name)

    @classmethod
    def parse(cls, text: str) -> Dedup:
        # A header name is an HTTP token (RFC 9110): one with a space could never be sent, so the
        # rule would silently dedup nothing.
        if not re.match(DEDUP_PATTERN, text):
            raise FieldError(f"{text!r} is not a dedup rule; expected \"header:NAME\" (an HTTP "
                             "header name), \"body:FIELD\" (a top-level JSON field) or \"none\"")
        where, _, name = text.partition(":")
        return cls("none") if text == "none" else cls(where, name)

    def __str__(self) -> str:
        return self.where if self.name is None else f"{self.where}:{self.name}"


class Endpoint(Table, frozen=True, kw_only=True):
    """The call that creates a business operation (an email sent, an order placed)."""

    method: Annotated[Literal["POST", "PUT"], Meta(description="the HTTP method")] = "POST"
    path: Annotated[str, Meta(pattern=r"^/[A-Za-z0-9._~/-]*$", description=(
        "the path under the service's base URL, e.g. /messages"))]
    response: Annotated[Mapping[str, Any], Meta(description=(
        "the JSON object it answers (201) when it applies the operation; string values may use "
        "{id} (the operation's id: op_1, op_2, ... in the order applied) and {key} (its dedup key)"
    ))] = {}

    def __post_init__(self) -> None:
        _freeze(self, "response")


# What `url_env` may not replace: the agent's own process needs them, or the harness sets them.
RESERVED_ENV = frozenset({"PATH", "HOME", "SHELL", "USER", "TMPDIR", "LANG", "PWD", "OPENAI_BASE_URL"})
RESERVED_ENV_PREFIXES = ("PYTHON", "LD_", "LC_", "CRASHMATRIX_")
STATUS_PATH = r"^/[A-Za-z0-9._~/-]*\{(key|id|ref)\}[A-Za-z0-9._~/-]*$"


class Service(Table, frozen=True, kw_only=True):
    """A downstream service the agent acts on, faked per case on 127.0.0.1 (docs/downstream.md)."""

    name: Annotated[str, Meta(pattern=r"^[a-z][a-z0-9_]*$", description=(
        "lowercase letters, digits and '_'; the agent finds the base URL in "
        "CRASHMATRIX_SERVICE_<NAME>_URL"))]
    create: Annotated[Endpoint, Meta(description="the call that applies one business operation")]
    dedup: Annotated[Dedup, Meta(description=(
        '"header:NAME", "body:FIELD" or "none": how a repeated submission is recognised'
    ))] = msgspec.field(default_factory=lambda: Dedup("none"))
    status: Annotated[Annotated[str, Meta(pattern=STATUS_PATH)] | None, Meta(description=(
        "a status query, GET PATH with {key} (by dedup key), {ref} (by the reference field) or "
        "{id} (by operation id): 200 with the operation's response, 404 when there is none"))] = None
    reference: Annotated[Annotated[str, Meta(pattern=r"^[^\s.]+$")] | None, Meta(description=(
        "a top-level body field the service keeps with each operation without deduplicating on "
        "it (a client reference), so a status query by {ref} finds the first operation sent "
        "with it"))] = None
    tool: EffectTool = None
    where: Annotated[Mapping[str, Scalar], Meta(description=(
        'argument = value: which calls of `tool` send to this service, when one tool serves '
        'several (e.g. { service = "mail" }); a call whose argument has another value is not '
        "this service's; empty: every call of the tool"))] = {}
    url_env: Annotated[Annotated[str, Meta(pattern=r"^[A-Z_][A-Z0-9_]*$")] | None, Meta(description=(
        "also give the base URL in this environment variable, the one your client already reads "
        "(e.g. MAIL_API_URL)"))] = None

    def __post_init__(self) -> None:
        _freeze(self, "where")
        if self.where and self.tool is None:
            raise FieldError("where tells apart the calls of `tool`; name the tool", "where")
        if self.dedup.where == "none" and self.status is None:
            # Nothing would let any agent learn, after a crash, whether an operation applied: a
            # double could only be avoided by luck, so the scenario could not fairly judge one.
            raise FieldError("a service with no dedup key and no status query leaves an agent no "
                             "way to learn whether an operation applied; set dedup (a key) or "
                             "status (a query)", "status")
        if self.url_env is not None and (self.url_env in RESERVED_ENV or self.url_env.startswith(
                RESERVED_ENV_PREFIXES)):
            raise FieldError(f"{self.url_env!r} is a variable the agent or the harness needs; name "
                             "the one your client reads for this service's URL", "url_env")
        if self.status is not None and "{key}" in self.status and self.dedup.where == "none":
            raise FieldError("a status query by {key} needs a dedup key; query by {ref} (with "
                             "reference) or {id}, or set dedup", "status")
        if self.status is not None and "{ref}" in self.status and self.reference is None:
            raise FieldError("a status query by {ref} needs reference, the body field it is "
                             "looked up by", "status")

    @property
    def env(self) -> str:
        """The environment variable that holds the service's base URL."""
        return f"CRASHMATRIX_SERVICE_{self.name.upper()}_URL"

    @property
    def envs(self) -> tuple[str, ...]:
        """Every variable the base URL is given in: `env`, and `url_env` when set."""
        return (self.env,) if self.url_env is None else (self.env, self.url_env)


class Scenario(Table, frozen=True, kw_only=True):
    """A crash-test scenario: one TOML file."""

    name: Annotated[str, Meta(pattern=r"^[a-z0-9][a-z0-9_-]*$", description=(
        "lowercase letters, digits, '-' and '_'; default: the file's stem; unique across all "
        "loaded directories"
    ))]
    source: str  # the file it was loaded from; set by the loader, never written in the file
    description: Annotated[str, Meta(description="one line for `crashmatrix list`")] = ""
    task: Annotated[NonEmpty, Meta(description="the prompt the first incarnation runs")]
    workspace: Annotated[Files, Meta(description="files written before the first start")] = {}
    tools: Annotated[Tools, Meta(description="the tool set and replay policies")] = (
        msgspec.field(default_factory=Tools))
    agent: Annotated[AgentSettings, Meta(description="agent settings")] = (
        msgspec.field(default_factory=AgentSettings))
    provider: Annotated[ProviderSettings, Meta(description="fake-provider settings")] = (
        msgspec.field(default_factory=ProviderSettings))
    script: Annotated[tuple[Rule, ...], Meta(min_length=1, description=(
        "how the fake model answers: the first rule whose `when` holds gives the reply"
    ))]
    faults: Annotated[tuple[Fault, ...], Meta(description="scheduled provider faults")] = ()
    inputs: Annotated[tuple[Input, ...], Meta(description="user inputs delivered at a boundary")] = ()
    cancels: Annotated[tuple[Cancel, ...], Meta(description=(
        "cancel requests delivered at a boundary"
    ))] = ()
    expect: Annotated[Expect, Meta(description="the expected end state")] = (
        msgspec.field(default_factory=Expect))
    matrix: Annotated[MatrixSettings, Meta(description="crash scheduling for this scenario")] = (
        msgspec.field(default_factory=MatrixSettings))
    services: Annotated[tuple[Service, ...], Meta(description=(
        "downstream services the agent acts on, each faked per case (docs/downstream.md)"
    ))] = ()
    # Filled in by the loader rather than written: `source` always, `name` when absent.
    loader_keys: ClassVar[tuple[str, ...]] = ("name", "source")

    def __post_init__(self) -> None:
        force_setattr(self, "workspace", _paths(self.workspace, "workspace"))
        enabled = self.tools.enabled
        rules: list[Rule] = []
        for i, written in enumerate(self.script):
            rule = written if written.name else replace(written, name=f"script[{i}]")
            if any(r.name == rule.name for r in rules):
                raise FieldError(f"duplicate rule name {rule.name!r}", "script", i, "name")
            for j, call in enumerate(rule.reply.tool_calls):
                if call.tool not in enabled:
                    raise FieldError(f"tool {call.tool!r} is not enabled; enabled: "
                                     f"{', '.join(enabled)}",
                                     "script", i, "reply", "tool_calls", j, "tool")
            rules.append(rule)
        force_setattr(self, "script", tuple(rules))
        # A rule (or fault) can only react to results of calls that some reply makes.
        made = {_call_key(call) for rule in rules for call in rule.reply.tool_calls}
        conditions = [("script", i, "rule", r.when) for i, r in enumerate(rules)] + [
            ("faults", i, "fault", f.when) for i, f in enumerate(self.faults)]
        for table, i, owner, when in conditions:
            dead = _dead_key(when, made, owner)
            if dead is not None:
                field, key, message = dead
                raise FieldError(message, table, i, "when", field, str(key))
        effect_tables: tuple[tuple[str, tuple[PatternRule | RecordRule, ...]], ...] = (
            ("patterns", self.expect.patterns), ("records", self.expect.records))
        for name, effect_rules in effect_tables:
            for i, er in enumerate(effect_rules):
                if er.tool is not None and er.tool not in enabled:
                    raise FieldError(f"tool {er.tool!r} is not enabled; enabled: {', '.join(enabled)}",
                                     "expect", name, i, "tool")
        seen_services: set[str] = set()
        seen_envs: set[str] = set()
        for i, service in enumerate(self.services):
            if service.name in seen_services:
                raise FieldError(f"duplicate service name {service.name!r}", "services", i, "name")
            seen_services.add(service.name)
            if service.url_env is not None and service.url_env in seen_envs:
                raise FieldError(f"another service already gives its URL in {service.url_env!r}",
                                 "services", i, "url_env")
            seen_envs.update(service.envs)
            if service.tool is not None and service.tool not in enabled:
                raise FieldError(f"tool {service.tool!r} is not enabled; enabled: {', '.join(enabled)}",
                                 "services", i, "tool")
        for name in self.expect.applied:
            if name not in seen_services:
                raise FieldError(f"no service {name!r} is declared; declared: "
                                 f"{', '.join(sorted(seen_services)) or 'none'}", "expect", "applied", name)
        named = {r.tool for r in self.expect.effect_rules} | {s.tool for s in self.services}
        for table in ("policies", "restart_policies"):
            for tool, policy in getattr(self.tools, table).items():
                if policy is Policy.IDEMPOTENT and tool not in named:
                    # A promise only the world can check: with nothing naming where the effect
                    # shows, every repeat would be judged from probes and fail.
                    raise FieldError(
                        f"tool {tool!r} is declared idempotent, but no expect.records or "
                        f"expect.patterns rule names it (tool = {tool!r}), so whether a repeat took "
                        "effect once cannot be judged; name where its effect shows, or declare it "
                        "read-only or never", "tools", table, tool)
        contradiction = _unmeetable(rules, self.expect)
        if contradiction is not None:
            raise contradiction
        # Just past the agent's own timeout, so the client gives up first.
        hold = min(self.agent.provider_timeout_s + 1.0, MAX_HOLD_S)
        force_setattr(self, "faults", tuple(
            replace(f, hold=hold) if f.kind is ProviderFault.TIMEOUT and f.hold is None else f
            for f in self.faults))
        seen: set[str] = set()
        scheduled: tuple[tuple[str, tuple[Input | Cancel, ...]], ...] = (
            ("inputs", self.inputs), ("cancels", self.cancels))
        for name, items in scheduled:
            for i, item in enumerate(items):
                if item.id in seen:
                    raise FieldError(f"duplicate id {item.id!r} (input and cancel ids share one "
                                     "namespace)", name, i, "id")
                seen.add(item.id)


def _unmeetable(rules: list[Rule], expect: Expect) -> FieldError | None:
    """An expectation no run can meet, decided from the script alone; None when it can be met or
    that cannot be decided (docs/scenarios.md, "Expectations the script cannot meet").

    A run completes only on a final answer, and its answer is the text of the `reply.final` that
    gave it (verbatim when it holds no placeholder: a placeholder brings in tool output, which
    could hold anything). A script built in code with no rule (the verifier's tests) is left be.
    """
    if not rules:
        return None
    finals = [r.reply.final for r in rules if r.reply.final is not None]
    if not finals and set(expect.outcome) == {Outcome.COMPLETED}:
        return FieldError("the scenario expects the run to end completed, but no rule of the "
                          "script gives a final answer (`reply.final`), and only a final answer "
                          "completes a run; add such a rule, or expect another outcome",
                          "expect", "outcome")
    if not finals or Outcome.COMPLETED not in expect.outcome or any(
            template.placeholders(f) for f in finals):
        return None
    for i, needle in enumerate(expect.final_answer_contains):
        if not any(needle in f for f in finals):
            at: tuple[str | int, ...] = ("final_answer_contains",)
            if len(expect.final_answer_contains) > 1:
                at = (*at, i)
            quoted = "; ".join(repr(f) for f in finals)
            return FieldError(f"no final answer of the script contains {needle!r}, so a completed "
                              f"run can never meet it (the script's `reply.final` texts: {quoted})",
                              "expect", *at)
    return None


def _call_key(call: CallSpec) -> tuple[str, str | None]:
    """The tool and normalised `path` its result is keyed by, as the fake reads a history."""
    path = call.args.get("path")
    return call.tool, str(PurePosixPath(path)) if isinstance(path, str) and path else None


def _dead_key(cond: Condition, made: set[tuple[str, str | None]], owner: str
              ) -> tuple[str, ResultKey, str] | None:
    """The first test of `cond` on a call the script never makes, as (field, key, message).

    Such a key never has a result, so its test is decided in advance: it never holds (a status
    other than none, contains), which stops the owning rule or fault from ever firing, or it
    always holds (none, lacks), which is as silent. Either is a typo in a key, refused.
    """
    tests: tuple[tuple[str, Mapping[ResultKey, Any]], ...] = (
        ("results", cond.results), ("last_turn", cond.last_turn), ("contains", cond.contains),
        ("lacks", cond.lacks))
    for field, mapping in tests:
        for key, wanted in mapping.items():
            if any(tool == key.tool and key.path in (None, path) for tool, path in made):
                continue
            call = key.tool if key.path is None else f"{key.tool} on {key.path!r}"
            if field == "lacks" or (field != "contains" and ResultStatus.NONE in wanted):
                outcome = "this test always holds"
            else:
                outcome = f"this {owner} can never fire"
            return field, key, (f"no reply of the script calls {call}, so there is never a "
                                f"result for {str(key)!r} and {outcome}")
    return None


def item_type(one_or_many: type) -> type:
    """The element type of Statuses, Outcomes or Phrases."""
    item: type = getattr(one_or_many, "item")  # noqa: B009 - the type checker sees the plain collection
    return item
