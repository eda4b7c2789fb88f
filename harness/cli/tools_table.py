"""`crashmatrix list --tools`: the tools an agent declares, as a table under its name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tabulate import tabulate

from crashmatrix.harness.adapters.interface import Adapter, PreflightError, declared_tools_of
from crashmatrix.harness.cli.exitcodes import fail


def tools_table(shown: str, adapter: Adapter) -> str:
    """The agent's declared tools as a table under its name (exit 2 when its app does not load)."""
    try:
        declared = declared_tools_of(adapter)
    except PreflightError as exc:
        fail(str(exc))
    if declared is None:
        return (f"{shown}: declares no tools (its adapter has no `declared_tools`): scenarios' tools "
                "are taken on trust\n")
    rows = [(t.name, t.policy.value if t.policy else "not declared (never unless a scenario says)",
             _arguments(t.parameters)) for t in declared]
    return f"{shown}:\n" + tabulate(rows, headers=["tool", "policy", "arguments"]) + "\n"


def _arguments(schema: Mapping[str, Any] | None) -> str:
    """`path: string, line: string` from an arguments schema (required ones unmarked, others `?`)."""
    if not schema:
        return "unknown"
    props = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    return ", ".join(f"{k}{'' if k in required else '?'}: {(v or {}).get('type', 'any')}"
                     for k, v in props.items()) or "none"
