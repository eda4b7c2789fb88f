"""The agent's tools as its adapter declares them, and whether a scenario fits them. Pure."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crashmatrix.harness.adapters.interface import ToolPolicy, ToolSpec, declared_tools_of
from crashmatrix.scenarios import locate
from crashmatrix.scenarios.errors import ScenarioError
from crashmatrix.scenarios.model import Policy, Scenario
from crashmatrix.scenarios.schema import render_field


def declared_policies(adapter: object) -> dict[str, Policy]:
    """The replay policies the adapter declares for its tools (the scenario's own win)."""
    return {t.name: Policy(t.policy.value) for t in declared_tools_of(adapter) or () if t.policy is not None}


@functools.cache
def reference_tools() -> tuple[ToolSpec, ...]:
    """The reference agent's tools (crashmatrix.agent.tools), as its adapters declare them, each
    with the policy the agent registers for it (`read` safe, the others never)."""
    from crashmatrix.agent.tools import BUILTINS  # noqa: PLC0415 - only our own adapters need it

    return tuple(ToolSpec(t.name, t.parameters, ToolPolicy(t.replay.value), t.description)
                 for t in BUILTINS.values())


def tool_misfit(scenario: Scenario, tools: Sequence[ToolSpec], agent: str) -> str | None:
    """Why the scenario cannot run against an agent with these tools, or None when it can: a
    tool the script calls (or a policy or an effect oracle names) that the agent lacks, or a call
    whose arguments the tool's schema refuses; said as a scenario error, with file, line, field."""
    have = {t.name: t for t in tools}
    names = ", ".join(sorted(have)) or "none"
    for at, tool in _named_tools(scenario):
        if tool not in have:
            return _located(scenario, at, (
                f"scenario {scenario.name!r} calls tool {tool!r}, which agent {agent!r} does not "
                f"have; its tools: {names}"))
    for i, rule in enumerate(scenario.script):
        for j, call in enumerate(rule.reply.tool_calls):
            problem = _args_problem(have[call.tool].parameters, call.args)
            if problem is not None:
                key, message = problem
                at = ("script", i, "reply", "tool_calls", j, "args", *((key,) if key else ()))
                return _located(scenario, at, f"scenario {scenario.name!r}: {message} for agent "
                                              f"{agent!r}'s tool {call.tool!r}")
    return None


def _named_tools(scenario: Scenario) -> list[tuple[tuple[str | int, ...], str]]:
    """Where the scenario names each tool it uses, first mention first."""
    out: list[tuple[tuple[str | int, ...], str]] = [
        (("script", i, "reply", "tool_calls", j, "tool"), c.tool)
        for i, r in enumerate(scenario.script) for j, c in enumerate(r.reply.tool_calls)]
    for table in ("policies", "restart_policies"):
        out += [(("tools", table, t), t) for t in getattr(scenario.tools, table)]
    for table in ("patterns", "records"):
        out += [(("expect", table, i, "tool"), r.tool) for i, r in enumerate(getattr(scenario.expect, table))
                if r.tool is not None]
    return out


def _located(scenario: Scenario, at: tuple[str | int, ...], message: str) -> str:
    """`file:line: field 'x': message`, as the loader names a field (line when the file is there)."""
    try:
        text: str | None = Path(scenario.source).read_text(encoding="utf-8")
    except (OSError, ValueError):
        text = None  # a scenario built in code, or a file gone since
    line = locate.line_of(text, at) if text is not None else None
    return str(ScenarioError(message, path=scenario.source, field=render_field(at), line=line))


_JSON_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list, tuple), "object": (dict, Mapping), "null": (type(None),),
}


def _args_problem(schema: Mapping[str, Any] | None, args: Mapping[str, Any]
                  ) -> tuple[str | None, str] | None:
    """What the tool's argument schema refuses in `args`, as (the argument it is about, or None,
    message): the top level only (required keys, unknown keys where additionalProperties is
    false, each property's JSON type); None when nothing."""
    if not schema or schema.get("type", "object") != "object":
        return None
    props = schema.get("properties") or {}
    takes = ", ".join(props) or "none"
    required = [k for k in schema.get("required") or () if k not in args]
    if required:
        return None, f"missing argument(s) {', '.join(map(repr, required))} (it takes {takes})"
    if schema.get("additionalProperties") is False:
        extra = [k for k in args if k not in props]
        if extra:
            return extra[0], f"unknown argument(s) {', '.join(map(repr, extra))} (it takes {takes})"
    for key, value in args.items():
        kind = (props.get(key) or {}).get("type")
        kinds = [kind] if isinstance(kind, str) else list(kind) if isinstance(kind, list) else []
        known = [k for k in kinds if k in _JSON_TYPES]
        if known and not any(_is(value, k) for k in known):
            return key, f"argument {key!r} is {type(value).__name__}, but the tool takes {' or '.join(known)}"
    return None


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False  # JSON's true is no number
    return isinstance(value, _JSON_TYPES[kind])
