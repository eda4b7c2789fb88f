"""The agent's tools as its adapter declares them, and whether a scenario fits them. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from crashmatrix.harness.adapters.interface import ToolPolicy, ToolSpec, declared_tools_of
from crashmatrix.scenarios.model import Policy, Scenario


def declared_policies(adapter: object) -> dict[str, Policy]:
    """The replay policies the adapter declares for its tools (the scenario's own win)."""
    return {t.name: Policy(t.policy.value) for t in declared_tools_of(adapter) or () if t.policy is not None}


def reference_tools() -> tuple[ToolSpec, ...]:
    """The reference agent's tools (crashmatrix.agent.tools), as its adapters declare them. `read`
    is read-only; the others have effects that must not be repeated."""
    from crashmatrix.agent.tools import BUILTINS  # noqa: PLC0415 - only our own adapters need it

    return tuple(ToolSpec(t.name, t.parameters,
                          ToolPolicy.NEVER if t.replay.value == "never" else ToolPolicy.READ_ONLY,
                          t.description)
                 for t in BUILTINS.values())


def tool_misfit(scenario: Scenario, tools: Sequence[ToolSpec], agent: str) -> str | None:
    """Why the scenario cannot run against an agent with these tools, or None when it can: a
    tool the script calls (or a policy names) that the agent lacks, or a call whose arguments
    its schema refuses."""
    have = {t.name: t for t in tools}
    wanted = dict.fromkeys([*(c.tool for r in scenario.script for c in r.reply.tool_calls),
                            *scenario.tools.policies, *scenario.tools.restart_policies,
                            *(r.tool for r in scenario.expect.effect_rules if r.tool is not None)])
    missing = [t for t in wanted if t not in have]
    names = ", ".join(sorted(have)) or "none"
    if missing:
        return (f"scenario {scenario.name!r} ({scenario.source}) calls tool(s) "
                f"{', '.join(repr(t) for t in missing)}, which agent {agent!r} does not have; its "
                f"tools: {names}")
    for i, rule in enumerate(scenario.script):
        for j, call in enumerate(rule.reply.tool_calls):
            problem = _args_problem(have[call.tool].parameters, call.args)
            if problem is not None:
                return (f"scenario {scenario.name!r} ({scenario.source}), script[{i}].reply."
                        f"tool_calls[{j}]: {problem} for agent {agent!r}'s tool {call.tool!r}")
    return None


_JSON_TYPES: Mapping[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "array": (list, tuple), "object": (dict, Mapping), "null": (type(None),),
}


def _args_problem(schema: Mapping[str, Any] | None, args: Mapping[str, Any]) -> str | None:
    """What the tool's argument schema refuses in `args` (the top level only: required keys,
    unknown keys where additionalProperties is false, and each property's JSON type); None."""
    if not schema or schema.get("type", "object") != "object":
        return None
    props = schema.get("properties") or {}
    required = [k for k in schema.get("required") or () if k not in args]
    if required:
        return f"missing argument(s) {', '.join(map(repr, required))} (it takes {', '.join(props) or 'none'})"
    if schema.get("additionalProperties") is False:
        extra = [k for k in args if k not in props]
        if extra:
            takes = ", ".join(props) or "none"
            return f"unknown argument(s) {', '.join(map(repr, extra))} (it takes {takes})"
    for key, value in args.items():
        kind = (props.get(key) or {}).get("type")
        kinds = [kind] if isinstance(kind, str) else list(kind) if isinstance(kind, list) else []
        known = [k for k in kinds if k in _JSON_TYPES]
        if known and not any(_is(value, k) for k in known):
            return f"argument {key!r} is {type(value).__name__}, but the tool takes {' or '.join(known)}"
    return None


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False  # JSON's true is no number
    return isinstance(value, _JSON_TYPES[kind])
