"""The scenario schema: parsed TOML becomes a Scenario, or a ScenarioError naming the field."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any, NoReturn, TypeVar

from crashmatrix.scenarios import template
from crashmatrix.scenarios.errors import ScenarioError
from crashmatrix.scenarios.model import (
    TOOL_ARGS,
    AgentSettings,
    Boundary,
    BoundaryKind,
    CallIds,
    CallSpec,
    Cancel,
    Condition,
    Expect,
    Fault,
    FaultKind,
    Input,
    LineRule,
    MatrixSettings,
    Outcome,
    Policy,
    ProviderSettings,
    Reply,
    ResultKey,
    ResultStatus,
    Role,
    Rule,
    Scenario,
    ToolName,
    Tools,
)

E = TypeVar("E", bound=StrEnum)

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
# What a missing required field should have held, for the error message.
REQUIRED_HINTS = {
    "task": "a non-empty string (the prompt)",
    "script": "an array of rules ([[script]])",
    "reply": "a table with 'final' or 'tool_calls'",
    "tool": "a tool name",
    "args": "a table of the tool's string arguments",
    "kind": "a fault kind",
    "id": "an id string",
    "text": "a non-empty string",
    "at": "a probe boundary such as \"effect.after:append_note\"",
    "path": "a relative path in the workspace",
    "line": "one line of text",
}
# A timeout fault must end on its own even if nobody stops the server.
MAX_HOLD_S = 60.0


class _At:
    """A position in the file: the file name and the dotted field path, for error messages."""

    def __init__(self, source: str, field: str = "") -> None:
        self.source = source
        self.field = field

    def key(self, name: str) -> _At:
        # Data keys such as "read:CHANGELOG.md" are quoted, as TOML would spell them.
        part = name if BARE_KEY.match(name) else f'"{name}"'
        return _At(self.source, f"{self.field}.{part}" if self.field else part)

    def index(self, i: int) -> _At:
        return _At(self.source, f"{self.field}[{i}]")

    def fail(self, message: str) -> NoReturn:
        raise ScenarioError(message, path=self.source, field=self.field or None)


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date/time"


def _table(at: _At, value: object, allowed: tuple[str, ...], required: tuple[str, ...] = ()
           ) -> dict[str, Any]:
    if not isinstance(value, dict):
        at.fail(f"expected a table, got {_type_name(value)}")
    for k in value:
        if k not in allowed:
            at.key(k).fail(f"unknown field; expected one of {', '.join(allowed)}")
    for k in required:
        if k not in value:
            at.key(k).fail(f"missing required field; expected {REQUIRED_HINTS.get(k, 'a value')}")
    return value


def _str(at: _At, value: object, *, nonempty: bool = True) -> str:
    if not isinstance(value, str):
        at.fail(f"expected a string, got {_type_name(value)}")
    if nonempty and not value.strip():
        at.fail("expected a non-empty string")
    return value


def _int(at: _At, value: object, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        at.fail(f"expected an integer, got {_type_name(value)}")
    if value < minimum:
        at.fail(f"expected an integer >= {minimum}, got {value}")
    return value


def _number(at: _At, value: object, *, positive: bool = False, maximum: float | None = None
            ) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        at.fail(f"expected a number, got {_type_name(value)}")
    if value < 0 or (positive and value == 0):
        at.fail(f"expected a number {'>' if positive else '>='} 0, got {value}")
    if maximum is not None and value > maximum:
        at.fail(f"expected a number <= {maximum:g}, got {value}")
    return float(value)


def _map(at: _At, value: object, what: str) -> dict[str, Any]:
    """A table whose keys are data (paths, tools), not field names."""
    if not isinstance(value, dict):
        at.fail(f"expected a table of {what}, got {_type_name(value)}")
    return value


def _list(at: _At, value: object) -> list[Any]:
    if not isinstance(value, list):
        at.fail(f"expected an array, got {_type_name(value)}")
    return value


def _one_or_many(at: _At, value: object) -> list[tuple[_At, object]]:
    """A single value or an array of values (e.g. `outcome = "completed"` or a list)."""
    if isinstance(value, list):
        if not value:
            at.fail("expected a value or a non-empty array")
        return [(at.index(i), v) for i, v in enumerate(value)]
    return [(at, value)]


def _enum(at: _At, value: object, enum: type[E], what: str) -> E:
    text = _str(at, value)
    try:
        return enum(text)
    except ValueError:
        choices = ", ".join(e.value for e in enum)
        at.fail(f"unknown {what} {text!r}; expected one of {choices}")


def _rel_path(at: _At, value: str) -> str:
    p = PurePosixPath(value)
    if p.is_absolute() or ".." in p.parts or value.strip() != value or not p.parts:
        at.fail(f"{value!r} must be a relative path inside the workspace")
    return str(p)


def _opt(table: Mapping[str, Any], key: str, at: _At, parse: Callable[[_At, Any], Any],
         default: Any) -> Any:
    return parse(at.key(key), table[key]) if key in table else default


# -- conditions --------------------------------------------------------------------------------

CONDITION_FIELDS = ("results", "last_turn", "contains", "lacks", "user_contains", "user_lacks",
                    "last_role", "turns", "min_turns", "max_turns")


def _result_key(at: _At, text: str) -> ResultKey:
    tool_text, sep, path = text.partition(":")
    tool = _enum(at, tool_text, ToolName, "tool")
    if not sep:
        return ResultKey(tool)
    if "path" not in TOOL_ARGS[tool]:
        at.fail(f"tool {tool.value!r} has no path argument, so {text!r} cannot name a path")
    return ResultKey(tool, _rel_path(at, path))


def _status_map(at: _At, value: object) -> Mapping[ResultKey, frozenset[ResultStatus]]:
    table = _map(at, value, "KEY = status")
    out: dict[ResultKey, frozenset[ResultStatus]] = {}
    for k, v in table.items():
        key = _result_key(at.key(k), k)
        out[key] = frozenset(_enum(a, s, ResultStatus, "result status")
                             for a, s in _one_or_many(at.key(k), v))
    return MappingProxyType(out)


def _text_map(at: _At, value: object) -> Mapping[ResultKey, str]:
    table = _map(at, value, "KEY = \"text\"")
    return MappingProxyType({_result_key(at.key(k), k): _str(at.key(k), v)
                             for k, v in table.items()})


def parse_condition(at: _At, value: object) -> Condition:
    t = _table(at, value, CONDITION_FIELDS)
    cond = Condition(
        results=_opt(t, "results", at, _status_map, MappingProxyType({})),
        last_turn=_opt(t, "last_turn", at, _status_map, MappingProxyType({})),
        contains=_opt(t, "contains", at, _text_map, MappingProxyType({})),
        lacks=_opt(t, "lacks", at, _text_map, MappingProxyType({})),
        user_contains=_opt(t, "user_contains", at, _str, None),
        user_lacks=_opt(t, "user_lacks", at, _str, None),
        last_role=_opt(t, "last_role", at, lambda a, v: _enum(a, v, Role, "role"), None),
        turns=_opt(t, "turns", at, _int, None),
        min_turns=_opt(t, "min_turns", at, _int, None),
        max_turns=_opt(t, "max_turns", at, _int, None),
    )
    if (cond.min_turns is not None and cond.max_turns is not None
            and cond.min_turns > cond.max_turns):
        at.key("max_turns").fail(f"must be >= min_turns ({cond.min_turns})")
    return cond


# -- script ------------------------------------------------------------------------------------

def _template(at: _At, text: str) -> str:
    for ph in template.placeholders(text):
        _result_key(at, ph.key)
    if template.near_misses(text):
        at.fail("malformed placeholder; expected {result.KEY} or {last_line.KEY}, "
                "e.g. {last_line.bash}")
    return text


def _call(at: _At, value: object, enabled: tuple[ToolName, ...]) -> CallSpec:
    t = _table(at, value, ("tool", "args"), ("tool", "args"))
    tool = _enum(at.key("tool"), t["tool"], ToolName, "tool")
    if tool not in enabled:
        at.key("tool").fail(f"tool {tool.value!r} is not enabled; enabled: "
                            f"{', '.join(e.value for e in enabled)}")
    args_at = at.key("args")
    raw = _map(args_at, t["args"], "argument = \"value\"")
    want = TOOL_ARGS[tool]
    takes = f"{tool.value} takes {', '.join(want)}"
    for k in raw:
        if k not in want:
            args_at.fail(f"unknown argument {k!r}; {takes}")
    for k in want:
        if k not in raw:
            args_at.fail(f"missing argument {k!r}; {takes}")
    args = {k: _str(args_at.key(k), raw[k], nonempty=False) for k in want}
    return CallSpec(tool, MappingProxyType(args))


def _reply(at: _At, value: object, enabled: tuple[ToolName, ...]) -> Reply:
    t = _table(at, value, ("final", "content", "tool_calls"))
    if ("final" in t) == ("tool_calls" in t):
        at.fail("expected exactly one of 'final' (a final answer) or 'tool_calls'")
    if "final" in t:
        if "content" in t:
            at.key("content").fail("'content' goes with 'tool_calls'; a final answer is 'final'")
        return Reply(_template(at.key("final"), _str(at.key("final"), t["final"])))
    calls_at = at.key("tool_calls")
    calls = _list(calls_at, t["tool_calls"])
    if not calls:
        calls_at.fail("expected at least one tool call")
    content = _opt(t, "content", at, lambda a, v: _template(a, _str(a, v)), None)
    return Reply(content, tuple(_call(calls_at.index(i), c, enabled) for i, c in enumerate(calls)))


def _script(at: _At, value: object, enabled: tuple[ToolName, ...]) -> tuple[Rule, ...]:
    rules = _list(at, value)
    if not rules:
        at.fail("expected at least one rule")
    out: list[Rule] = []
    seen: set[str] = set()
    for i, raw in enumerate(rules):
        r_at = at.index(i)
        t = _table(r_at, raw, ("name", "when", "reply"), ("reply",))
        name = _opt(t, "name", r_at, _str, f"script[{i}]")
        if name in seen:
            r_at.key("name").fail(f"duplicate rule name {name!r}")
        seen.add(name)
        when = _opt(t, "when", r_at, parse_condition, Condition())
        out.append(Rule(name, when, _reply(r_at.key("reply"), t["reply"], enabled)))
    return tuple(out)


# -- faults, inputs, cancels -------------------------------------------------------------------

def _faults(at: _At, value: object, agent: AgentSettings) -> tuple[Fault, ...]:
    out: list[Fault] = []
    for i, raw in enumerate(_list(at, value)):
        f_at = at.index(i)
        t = _table(f_at, raw, ("kind", "when", "times", "hold_s"), ("kind",))
        kind = _enum(f_at.key("kind"), t["kind"], FaultKind, "fault kind")
        if "hold_s" in t and kind is not FaultKind.TIMEOUT:
            f_at.key("hold_s").fail("only a 'timeout' fault holds the response")
        # Just past the agent's own timeout, so the client gives up first.
        default_hold = min(agent.provider_timeout_s + 1.0, MAX_HOLD_S)
        out.append(Fault(
            kind=kind,
            when=_opt(t, "when", f_at, parse_condition, Condition()),
            times=_opt(t, "times", f_at, lambda a, v: _int(a, v, minimum=1), 1),
            hold_s=_opt(t, "hold_s", f_at,
                        lambda a, v: _number(a, v, positive=True, maximum=MAX_HOLD_S),
                        default_hold),
        ))
    return tuple(out)


def parse_boundary(at: _At, value: object) -> Boundary:
    text = _str(at, value)
    kind_text, sep, label = text.partition(":")
    kind = _enum(at, kind_text, BoundaryKind, "probe kind")
    if sep and not label:
        at.fail(f"{text!r} has an empty label; write {kind.value!r} to match any label")
    return Boundary(kind, label if sep else None)


def _id(at: _At, value: object, seen: set[str]) -> str:
    text = _str(at, value)
    if not ID_RE.match(text):
        at.fail(f"{text!r} is not a valid id; use letters, digits, '.', '_' and '-'")
    if text in seen:
        at.fail(f"duplicate id {text!r} (input and cancel ids share one namespace)")
    seen.add(text)
    return text


def _inputs(at: _At, value: object, seen: set[str]) -> tuple[Input, ...]:
    out: list[Input] = []
    for i, raw in enumerate(_list(at, value)):
        i_at = at.index(i)
        t = _table(i_at, raw, ("id", "text", "at"), ("id", "text", "at"))
        out.append(Input(_id(i_at.key("id"), t["id"], seen), _str(i_at.key("text"), t["text"]),
                         parse_boundary(i_at.key("at"), t["at"])))
    return tuple(out)


def _cancels(at: _At, value: object, seen: set[str]) -> tuple[Cancel, ...]:
    out: list[Cancel] = []
    for i, raw in enumerate(_list(at, value)):
        c_at = at.index(i)
        t = _table(c_at, raw, ("id", "at"), ("id", "at"))
        out.append(Cancel(_id(c_at.key("id"), t["id"], seen),
                          parse_boundary(c_at.key("at"), t["at"])))
    return tuple(out)


# -- expect ------------------------------------------------------------------------------------

LINE_FIELDS = ("path", "line", "count", "min", "max", "extra_per_crash",
               "missing_ok_if_crash_before")


def _line_rule(at: _At, value: object) -> LineRule:
    t = _table(at, value, LINE_FIELDS, ("path", "line"))
    path = _rel_path(at.key("path"), _str(at.key("path"), t["path"]))
    line = _str(at.key("line"), t["line"])
    if "\n" in line:
        at.key("line").fail("expected a single line (no newline)")
    if "count" in t and ("min" in t or "max" in t):
        at.key("count").fail("use either 'count' or 'min'/'max', not both")
    if not {"count", "min", "max"} & set(t):
        at.fail("expected 'count', or 'min' and/or 'max'")
    if "count" in t:
        low = high = _int(at.key("count"), t["count"])
    else:
        low = _opt(t, "min", at, _int, 0)
        high = _opt(t, "max", at, _int, None)
        if high is not None and high < low:
            at.key("max").fail(f"must be >= min ({low})")
    return LineRule(
        path=path,
        line=line,
        min=low,
        max=high,
        extra_per_crash=_opt(t, "extra_per_crash", at, _int, 0),
        missing_ok_if_crash_before=_opt(t, "missing_ok_if_crash_before", at, parse_boundary,
                                        None),
    )


def _expect(at: _At, value: object) -> Expect:
    t = _table(at, value, ("outcome", "final_answer_contains", "files", "lines"))
    outcome: tuple[Outcome, ...] = (Outcome.COMPLETED,)
    if "outcome" in t:
        outcome = tuple(_enum(a, v, Outcome, "outcome")
                        for a, v in _one_or_many(at.key("outcome"), t["outcome"]))
    finals: tuple[str, ...] = ()
    if "final_answer_contains" in t:
        finals = tuple(_str(a, v) for a, v in
                       _one_or_many(at.key("final_answer_contains"), t["final_answer_contains"]))
    files = _opt(t, "files", at, _files, MappingProxyType({}))
    lines = tuple(_line_rule(at.key("lines").index(i), r)
                  for i, r in enumerate(_opt(t, "lines", at, _list, [])))
    return Expect(outcome, finals, files, lines)


def _files(at: _At, value: object) -> Mapping[str, str]:
    out = {}
    for k, v in _map(at, value, "path = \"content\"").items():
        out[_rel_path(at.key(k), k)] = _str(at.key(k), v, nonempty=False)
    return MappingProxyType(out)


# -- the whole scenario ------------------------------------------------------------------------

TOP_FIELDS = ("name", "description", "task", "workspace", "tools", "agent", "provider",
              "script", "faults", "inputs", "cancels", "expect", "matrix")


def _tools(at: _At, value: object) -> Tools:
    t = _table(at, value, ("enabled", "policies", "restart_policies"))
    enabled: tuple[ToolName, ...] = tuple(ToolName)
    if "enabled" in t:
        e_at = at.key("enabled")
        items = _list(e_at, t["enabled"])
        if not items:
            e_at.fail("expected at least one tool")
        enabled = tuple(_enum(e_at.index(i), v, ToolName, "tool") for i, v in enumerate(items))
        dupes = sorted({n.value for n in enabled if enabled.count(n) > 1})
        if dupes:
            e_at.fail(f"duplicate tool(s): {', '.join(dupes)}")

    def policies(p_at: _At, raw: object) -> Mapping[ToolName, Policy]:
        out: dict[ToolName, Policy] = {}
        for k, v in _map(p_at, raw, "tool = \"safe\"|\"never\"").items():
            tool = _enum(p_at.key(k), k, ToolName, "tool")
            if tool not in enabled:
                p_at.key(k).fail(f"tool {k!r} is not enabled; enabled: "
                                 f"{', '.join(e.value for e in enabled)}")
            out[tool] = _enum(p_at.key(k), v, Policy, "policy")
        return MappingProxyType(out)

    return Tools(
        enabled=enabled,
        policies=_opt(t, "policies", at, policies, MappingProxyType({})),
        restart_policies=_opt(t, "restart_policies", at, policies, MappingProxyType({})),
    )


def _agent(at: _At, value: object) -> AgentSettings:
    t = _table(at, value, ("resume_budget", "max_retries", "retry_delay_s", "provider_timeout_s"))
    d = AgentSettings()
    return AgentSettings(
        resume_budget=_opt(t, "resume_budget", at, _int, d.resume_budget),
        max_retries=_opt(t, "max_retries", at, _int, d.max_retries),
        retry_delay_s=_opt(t, "retry_delay_s", at, _number, d.retry_delay_s),
        provider_timeout_s=_opt(t, "provider_timeout_s", at,
                                lambda a, v: _number(a, v, positive=True), d.provider_timeout_s),
    )


def _matrix(at: _At, value: object) -> MatrixSettings:
    t = _table(at, value, ("crash_loop", "max_depth"))
    return MatrixSettings(
        crash_loop=_opt(t, "crash_loop", at, lambda a, v: _int(a, v, minimum=1),
                        MatrixSettings().crash_loop),
        max_depth=_opt(t, "max_depth", at, lambda a, v: _int(a, v, minimum=1), None))


def _provider(at: _At, value: object) -> ProviderSettings:
    t = _table(at, value, ("unknown_marker", "call_ids"))
    d = ProviderSettings()
    return ProviderSettings(
        unknown_marker=_opt(t, "unknown_marker", at, _str, d.unknown_marker),
        call_ids=_opt(t, "call_ids", at, lambda a, v: _enum(a, v, CallIds, "call id scheme"),
                      d.call_ids))


def _name(at: _At, value: object) -> str:
    text = _str(at, value)
    if not NAME_RE.match(text):
        at.fail(f"{text!r} is not a valid scenario name; use lowercase letters, digits, "
                "'-' and '_', starting with a letter or digit")
    return text


def parse_scenario(data: object, *, source: str, default_name: str) -> Scenario:
    """Validate one parsed TOML document. `default_name` is used when `name` is absent."""
    root = _At(source)
    t = _table(root, data, TOP_FIELDS, ("task", "script"))
    name = _name(root.key("name"), t.get("name", default_name))
    tools = _tools(root.key("tools"), t.get("tools", {}))
    agent = _opt(t, "agent", root, _agent, AgentSettings())
    seen_ids: set[str] = set()
    return Scenario(
        name=name,
        source=source,
        description=_opt(t, "description", root, lambda a, v: _str(a, v, nonempty=False), ""),
        task=_str(root.key("task"), t["task"]),
        workspace=_opt(t, "workspace", root, _files, MappingProxyType({})),
        tools=tools,
        agent=agent,
        provider=_opt(t, "provider", root, _provider, ProviderSettings()),
        script=_script(root.key("script"), t["script"], tools.enabled),
        faults=_opt(t, "faults", root, lambda a, v: _faults(a, v, agent), ()),
        inputs=_opt(t, "inputs", root, lambda a, v: _inputs(a, v, seen_ids), ()),
        cancels=_opt(t, "cancels", root, lambda a, v: _cancels(a, v, seen_ids), ()),
        expect=_opt(t, "expect", root, _expect, Expect()),
        matrix=_opt(t, "matrix", root, _matrix, MatrixSettings()),
    )
