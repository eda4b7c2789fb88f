"""Tools, their argument schemas and replay policies, confined to a workspace."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crashmatrix.agent.records import Replay


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False
    terminate: bool = False


class ToolError(Exception):
    """A failure the model should see as an error result (never a crash of the agent)."""


ToolFn = Callable[[Path, dict[str, Any]], ToolResult]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    replay: Replay
    fn: ToolFn

    def spec(self) -> dict[str, Any]:
        """The OpenAI `tools` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def _schema(**props: str) -> dict[str, Any]:
    """An object schema whose properties are all required, typed as given."""
    return {
        "type": "object",
        "properties": {k: {"type": t} for k, t in props.items()},
        "required": list(props),
        "additionalProperties": False,
    }


_JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}


def check_args(tool: Tool, args: Any) -> None:
    """A small JSON-schema subset check: object, required, property types, no extras."""
    schema = tool.parameters
    if not isinstance(args, dict):
        raise ToolError(f"{tool.name}: arguments must be a JSON object, got {type(args).__name__}")
    props: dict[str, Any] = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in args:
            raise ToolError(f"{tool.name}: missing required argument {key!r}")
    for key, value in args.items():
        if key not in props:
            if schema.get("additionalProperties") is False:
                raise ToolError(f"{tool.name}: unknown argument {key!r}")
            continue
        want = props[key].get("type")
        py = _JSON_TYPES.get(want) if isinstance(want, str) else None
        bad_bool = want in ("integer", "number") and isinstance(value, bool)
        if py is not None and (not isinstance(value, py) or bad_bool):
            raise ToolError(f"{tool.name}: argument {key!r} must be {want}")


def confine(workspace: Path, rel: str) -> Path:
    """Resolve `rel` inside the workspace, refusing anything that escapes it (symlinks too), and
    anything that is not a plain file or missing: a FIFO or device would block or never end."""
    if "\x00" in rel:  # the OS refuses it with ValueError, which is no tool error
        raise ToolError(f"path {rel!r} contains a NUL byte")
    root = workspace.resolve()
    target = (root / rel).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"path {rel!r} is outside the workspace")
    if target.exists() and not (target.is_file() or target.is_dir()):
        raise ToolError(f"{rel}: not a regular file")
    return target


def _read(ws: Path, args: dict[str, Any]) -> ToolResult:
    path = confine(ws, args["path"])
    try:
        return ToolResult(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ToolError(f"{args['path']}: no such file") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise ToolError(f"{args['path']}: cannot read ({exc.__class__.__name__})") from None


def _append_note(ws: Path, args: dict[str, Any]) -> ToolResult:
    path = confine(ws, args["path"])
    line = str(args["line"]).rstrip("\n")
    if "\n" in line or "\r" in line:  # one call, one line: the result says "1 line"
        raise ToolError("append_note: 'line' must be a single line (no line breaks inside)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")
    return ToolResult(f"appended 1 line to {args['path']}")


def _write(ws: Path, args: dict[str, Any]) -> ToolResult:
    path = confine(ws, args["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(args["content"], encoding="utf-8")
    return ToolResult(f"wrote {len(args['content'])} characters to {args['path']}")


def _edit(ws: Path, args: dict[str, Any]) -> ToolResult:
    path = confine(ws, args["path"])
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ToolError(f"{args['path']}: no such file") from None
    count = text.count(args["old"])
    if count != 1:
        raise ToolError(f"{args['path']}: 'old' must occur exactly once, found {count}")
    path.write_text(text.replace(args["old"], args["new"], 1), encoding="utf-8")
    return ToolResult(f"edited {args['path']}")


BASH_TIMEOUT_S = 120.0


def _bash(ws: Path, args: dict[str, Any]) -> ToolResult:
    try:
        proc = subprocess.run(
            ["/bin/sh", "-c", args["command"]],
            cwd=ws,
            capture_output=True,
            text=True,
            timeout=BASH_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"command timed out after {BASH_TIMEOUT_S:g}s") from None
    out = f"exit code {proc.returncode}\n{proc.stdout}"
    if proc.stderr:
        out += f"\n[stderr]\n{proc.stderr}"
    return ToolResult(out, is_error=proc.returncode != 0)


def _stop_run(ws: Path, args: dict[str, Any]) -> ToolResult:
    return ToolResult(f"stopping the run: {args['reason']}", terminate=True)


BUILTINS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("read", "Read a UTF-8 text file in the workspace.", _schema(path="string"),
             Replay.SAFE, _read),
        Tool("append_note", "Append one line to a file in the workspace.",
             _schema(path="string", line="string"), Replay.NEVER, _append_note),
        Tool("write", "Write (replace) a file in the workspace.",
             _schema(path="string", content="string"), Replay.NEVER, _write),
        Tool("edit", "Replace one exact occurrence of 'old' with 'new' in a file.",
             _schema(path="string", old="string", new="string"), Replay.NEVER, _edit),
        Tool("bash", "Run a shell command in the workspace.", _schema(command="string"),
             Replay.NEVER, _bash),
        Tool("stop_run", "Ask the run to stop after this call.", _schema(reason="string"),
             Replay.NEVER, _stop_run),
    )
}


class Registry:
    """The tools registered now, with the replay policy in force now."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self.tools = dict(tools)

    @classmethod
    def build(
        cls, enabled: list[str] | None = None, policies: Mapping[str, Replay] | None = None
    ) -> Registry:
        names = list(BUILTINS) if enabled is None else enabled
        unknown = [n for n in [*names, *(policies or {})] if n not in BUILTINS]
        if unknown:
            raise ValueError(f"unknown tool(s): {', '.join(unknown)}; known: {', '.join(BUILTINS)}")
        tools = {}
        for name in names:
            tool = BUILTINS[name]
            if policies and name in policies:
                tool = replace(tool, replay=policies[name])
            tools[name] = tool
        return cls(tools)

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools.values()]


def invoke(tool: Tool, workspace: Path, args: Any) -> ToolResult:
    """Run a tool; every expected failure becomes an error result."""
    try:
        check_args(tool, args)
        return tool.fn(workspace, args)
    except ToolError as exc:
        return ToolResult(f"ERROR: {exc}", is_error=True)
    except OSError as exc:
        return ToolResult(f"ERROR: {tool.name}: {exc.strerror or exc}", is_error=True)
