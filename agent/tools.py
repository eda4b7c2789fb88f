"""Tools, their argument schemas, replay policies and limits; the file tools are confined to a workspace."""

from __future__ import annotations

import codecs
import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from crashmatrix.agent import downstream_call
from crashmatrix.agent.records import Replay


@dataclass(frozen=True)
class ToolResult:
    content: str
    is_error: bool = False
    terminate: bool = False


class ToolError(Exception):
    """A failure the model should see as an error result (never a crash of the agent)."""


class BashEnv(StrEnum):
    """The environment `bash` commands get (`durable-agent --bash-env`)."""

    INHERIT = "inherit"  # the agent's whole environment, API keys included (the historical default)
    CLEAN = "clean"  # only PATH, LANG, LC_ALL, and HOME and TMPDIR set to the workspace


@dataclass(frozen=True)
class ToolSettings:
    """Per-run options of the tools; `Registry.build` binds them to every tool it registers."""

    bash_env: BashEnv = BashEnv.INHERIT


@dataclass(frozen=True)
class CallContext:
    """Which call a tool runs for: the loop reserved `result_id` in tool_started before the run, so
    it is the same on the first run and on every recovery re-run (`rerun`)."""

    result_id: str
    call_id: str
    rerun: bool


ToolFn = Callable[[Path, dict[str, Any], ToolSettings], ToolResult]
CallFn = Callable[[Path, dict[str, Any], ToolSettings, CallContext | None], ToolResult]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    replay: Replay
    fn: ToolFn
    settings: ToolSettings = ToolSettings()
    # A tool whose effect depends on which call it is (a key derived from the call) runs through
    # `call`, which gets the CallContext; `fn` then serves callers that have none.
    call: CallFn | None = None
    # The replay one call records, from its arguments; it may only tighten `replay` (replay_of).
    replay_by_args: Callable[[Any], Replay] | None = None

    def replay_of(self, args: Any) -> Replay:
        """The replay policy a call with these arguments records in tool_started: a NEVER in
        force (the tool's own, or a scenario's override) is never loosened by the arguments."""
        if self.replay is Replay.NEVER or self.replay_by_args is None:
            return self.replay
        return self.replay_by_args(args)

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


# Every tool result is committed to the session log and sent to the model, so none may be unbounded.
# `read` truncates rather than refuses a larger file: with `bash` disabled, a refusal would leave the
# model no way to see any of it, and the marker says exactly how much is missing.
READ_CAP_BYTES = 1024 * 1024


def _newlines(text: str) -> str:
    """Universal newlines, as text-mode reads did before the caps (results stay byte-identical)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _dropped_marker(what: str, dropped: int, cap: int) -> str:
    return f"\n[{what} truncated: {dropped} more bytes dropped (cap {cap} bytes)]\n"


def _read(ws: Path, args: dict[str, Any], settings: ToolSettings) -> ToolResult:
    path = confine(ws, args["path"])
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            data = f.read(READ_CAP_BYTES)
        # final=False keeps a character the cap cut in half out of the text instead of failing on it.
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=len(data) < READ_CAP_BYTES)
    except FileNotFoundError:
        raise ToolError(f"{args['path']}: no such file") from None
    except (IsADirectoryError, UnicodeDecodeError) as exc:
        raise ToolError(f"{args['path']}: cannot read ({exc.__class__.__name__})") from None
    dropped = size - len(text.encode("utf-8"))
    text = _newlines(text)
    if len(data) >= READ_CAP_BYTES and dropped > 0:
        text += _dropped_marker(args["path"], dropped, READ_CAP_BYTES)
    return ToolResult(text)


def _append_note(ws: Path, args: dict[str, Any], settings: ToolSettings) -> ToolResult:
    path = confine(ws, args["path"])
    line = str(args["line"]).rstrip("\n")
    if "\n" in line or "\r" in line:  # one call, one line: the result says "1 line"
        raise ToolError("append_note: 'line' must be a single line (no line breaks inside)")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(line + "\n")
    return ToolResult(f"appended 1 line to {args['path']}")


def _write(ws: Path, args: dict[str, Any], settings: ToolSettings) -> ToolResult:
    path = confine(ws, args["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(args["content"], encoding="utf-8")
    return ToolResult(f"wrote {len(args['content'])} characters to {args['path']}")


def _edit(ws: Path, args: dict[str, Any], settings: ToolSettings) -> ToolResult:
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


# The limits of one `bash` call (README, "What is confined and what is not"). They are read at call
# time, so tests can lower them.
BASH_TIMEOUT_S = 120.0
# Per stream (stdout, stderr): the rest is read and counted but not kept, so a command that prints
# gigabytes costs neither memory nor log space.
BASH_OUTPUT_CAP_BYTES = 1024 * 1024
# After the group is killed, how long to wait for the pipes to close: a process that left the group
# (setsid, a daemon) can hold them open forever, and we stop reading rather than wait for it.
BASH_DRAIN_S = 1.0
_BASH_POLL_S = 0.05  # without a pidfd: how soon the exit of /bin/sh is noticed
_READ_CHUNK = 64 * 1024


class _Capped:
    """The first `cap` bytes of a stream, and how many bytes after them were dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = max(0, self.cap - len(self.kept))
        self.kept += chunk[:room]
        self.dropped += max(0, len(chunk) - room)

    def text(self, what: str) -> str:
        text = _newlines(bytes(self.kept).decode("utf-8", errors="replace"))
        if self.dropped:
            text += _dropped_marker(what, self.dropped, self.cap)
        return text


def _pump(sel: selectors.BaseSelector, timeout: float) -> None:
    """Read whatever the pipes hold now (waiting up to `timeout`); a pipe at EOF is unregistered.
    A key without a _Capped is the shell's pidfd: it only wakes the wait when the shell exits."""
    if not sel.get_map():
        time.sleep(timeout)  # both pipes closed and no pidfd: nothing to wait on but the clock
        return
    for key, _ in sel.select(timeout):
        if key.data is None:
            continue
        chunk = os.read(key.fd, _READ_CHUNK)
        if chunk:
            key.data.feed(chunk)
        else:
            sel.unregister(key.fd)


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when `pid` exits (Linux >= 5.3), else None (we poll)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exited(pid: int) -> bool:
    """Whether /bin/sh has exited, without reaping it: while it is an unreaped zombie its pid, and so
    its process group id, cannot be reused, so killing the group cannot hit a stranger."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _clean_env(ws: Path) -> dict[str, str]:
    """The environment of BashEnv.CLEAN: enough to run programs, nothing the agent was given."""
    home = str(ws.resolve())
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": home,
        "TMPDIR": home,  # no extra directory appears in the workspace; temp files stay in it
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "LC_ALL": os.environ.get("LC_ALL", "C.UTF-8"),
    }


def _bash(ws: Path, args: dict[str, Any], settings: ToolSettings) -> ToolResult:
    timeout = BASH_TIMEOUT_S
    proc = subprocess.Popen(
        ["/bin/sh", "-c", args["command"]],
        cwd=ws,
        env=_clean_env(ws) if settings.bash_env is BashEnv.CLEAN else None,
        stdin=subprocess.DEVNULL,  # the agent's stdin is not the command's to read (or block on)
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, so everything it starts can be killed
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    out, err = _Capped(BASH_OUTPUT_CAP_BYTES), _Capped(BASH_OUTPUT_CAP_BYTES)
    timed_out = False
    pidfd = _pidfd(proc.pid)
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ, out)
            sel.register(proc.stderr, selectors.EVENT_READ, err)
            if pidfd is not None:
                sel.register(pidfd, selectors.EVENT_READ, None)
            deadline = time.monotonic() + timeout
            # The call ends when /bin/sh exits, not when the pipes close: a background child holds
            # them open for as long as it runs.
            while not _exited(proc.pid):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                _pump(sel, remaining if pidfd is not None else min(remaining, _BASH_POLL_S))
            if pidfd is not None:
                sel.unregister(pidfd)
            # Background processes do not survive the call: the whole group is killed, always.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            drain_until = time.monotonic() + BASH_DRAIN_S
            while sel.get_map() and (remaining := drain_until - time.monotonic()) > 0:
                _pump(sel, remaining)
    finally:
        if proc.returncode is None:  # an exception (KeyboardInterrupt) left the command running
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if pidfd is not None:
            os.close(pidfd)
        proc.stdout.close()
        proc.stderr.close()
    if timed_out:
        raise ToolError(f"command timed out after {timeout:g}s (its process group was killed)")
    result = f"exit code {proc.returncode}\n{out.text('stdout')}"
    if err.kept or err.dropped:
        result += f"\n[stderr]\n{err.text('stderr')}"
    return ToolResult(result, is_error=proc.returncode != 0)


def _stop_run(ws: Path, args: dict[str, Any], settings: ToolSettings) -> ToolResult:
    return ToolResult(f"stopping the run: {args['reason']}", terminate=True)


def _post_json(ws: Path, args: dict[str, Any], settings: ToolSettings,
               context: CallContext | None) -> ToolResult:
    if context is None:
        # No reserved ids, no key that stays the same after a crash: refuse rather than guess one.
        raise ToolError("post_json: no call context (the agent loop passes the call's reserved "
                        "result id, from which the idempotency key derives); nothing was sent")
    try:
        target = downstream_call.resolve(args, os.environ, context.result_id, context.call_id)
    except downstream_call.SpecError as exc:
        raise ToolError(f"post_json: {exc}; nothing was sent") from None
    content, is_error = downstream_call.post(target, rerun=context.rerun)
    return ToolResult(content, is_error=is_error)


def _post_json_without_context(ws: Path, args: dict[str, Any], settings: ToolSettings) -> ToolResult:
    return _post_json(ws, args, settings, None)


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
        Tool("bash", "Run a shell command in the workspace (with a timeout and capped output; "
             "background processes are killed when the command exits).", _schema(command="string"),
             Replay.NEVER, _bash),
        Tool("stop_run", "Ask the run to stop after this call.", _schema(reason="string"),
             Replay.NEVER, _stop_run),
        # Safe to re-run because of its key and status query; a call with neither records never.
        Tool("post_json", downstream_call.DESCRIPTION, downstream_call.PARAMETERS, Replay.SAFE,
             _post_json_without_context, call=_post_json, replay_by_args=downstream_call.replay_of),
    )
}


class Registry:
    """The tools registered now, with the replay policy and the settings in force now."""

    def __init__(self, tools: Mapping[str, Tool]) -> None:
        self.tools = dict(tools)

    @classmethod
    def build(
        cls,
        enabled: list[str] | None = None,
        policies: Mapping[str, Replay] | None = None,
        *,
        settings: ToolSettings | None = None,
    ) -> Registry:
        names = list(BUILTINS) if enabled is None else enabled
        unknown = [n for n in [*names, *(policies or {})] if n not in BUILTINS]
        if unknown:
            raise ValueError(f"unknown tool(s): {', '.join(unknown)}; known: {', '.join(BUILTINS)}")
        tools = {}
        for name in names:
            tool = BUILTINS[name]
            if settings is not None:
                tool = replace(tool, settings=settings)
            if policies and name in policies:
                tool = replace(tool, replay=policies[name])
            tools[name] = tool
        return cls(tools)

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools.values()]


def invoke(tool: Tool, workspace: Path, args: Any, *, context: CallContext | None = None
           ) -> ToolResult:
    """Run a tool; every expected failure becomes an error result."""
    try:
        check_args(tool, args)
        if tool.call is not None:
            return tool.call(workspace, args, tool.settings, context)
        return tool.fn(workspace, args, tool.settings)
    except ToolError as exc:
        return ToolResult(f"ERROR: {exc}", is_error=True)
    except OSError as exc:
        return ToolResult(f"ERROR: {tool.name}: {exc.strerror or exc}", is_error=True)
    except ValueError as exc:
        # What the OS refuses as a value (a path it cannot encode) is the call's error too: an
        # exception escaping here would fail every recovery of a safe call the same way.
        return ToolResult(f"ERROR: {tool.name}: {exc}", is_error=True)
