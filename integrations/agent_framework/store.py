"""The checkpoint files as commits in order, and as the canonical transcript the verifier judges.

A commit is one checkpoint: one file `SESSION/checkpoints/<checkpoint_id>.json` that
`FileCheckpointStorage.save` writes whole (a temporary file, then `os.replace`). The workflow
saves one at the start of a run (holding the input, before any executor runs) and one at the end
of every superstep; its label is `checkpoint.superstep<N>` (N: the checkpoint's
`iteration_count`, 0 for the input's). Commits are numbered in the order of their `timestamp`
(set when the checkpoint is built, just before its save; Agent Framework's `get_latest` finds
the latest the same way), so the host's seams and this reader number them alike: a probe's
`seq` is the transcript's.

The transcript is what the workflow's agents hold. A checkpoint holds an agent's conversation in
its `AgentExecutor`'s state (`full_conversation`, and `cache`, messages not yet sent to it), and
the run's input as a message pending for the start executor (in the input checkpoint). The
newest checkpoint's messages are the transcript; each is placed at the first checkpoint that
held it (matched by what it says: role, text, calls, answered call). An agent's whole turn, its
model calls and its tool calls, runs inside one superstep, so all of a turn's messages arrive
in one commit, the one after the last model call: nothing of a turn is saved while it runs.

What a checkpoint store cannot give, so what the invariants reading it find (the adapter
declares the ones that do not apply):
- runs: a workflow run is read as one run (`run-1`, intent `prompt`), started by the commit that
  holds its input and completed at the first checkpoint after it that holds nothing left to run
  (no pending message, no pending request) with a final answer last: the workflow finished.
- intents: nothing is saved before a tool runs, nor after, until the superstep ends: no tool
  starts, replay policies or reserved result ids (`intent-before-effect`, `safe-rerun`,
  `reserved-result` have nothing to read).
- resumes: a resume from a checkpoint leaves no record of itself (`resume-budget` has nothing
  to count); inboxes and retries: none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.records.transcript import Call, Message, Run, Transcript

CHECKPOINTS = "checkpoints"  # FileCheckpointStorage's directory, in the session directory
EXECUTOR_STATE = "_executor_state"  # where a checkpoint's state keeps each executor's own
RUN_ID = "run-1"  # a workflow run is read as one run
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def checkpoint_label(iteration: int) -> str:
    """A checkpoint's commit label: the superstep it ends (0: the run's input)."""
    return f"checkpoint.superstep{_UNSAFE.sub('_', str(iteration))}"


@dataclass
class Files:
    """The session's checkpoint files in commit order, as parsed JSON (not decoded yet)."""

    ids: list[str] = field(default_factory=list)
    raw: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


def read_files(session: Path) -> Files:
    """The checkpoint files, ordered by (timestamp, id); a file that is not a JSON object is
    left out and named in `error` (the storage itself skips it when listing)."""
    directory = session / CHECKPOINTS
    out = Files()
    if not directory.is_dir():
        return out
    rows = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            out.error = out.error or f"{CHECKPOINTS}/{path.name}: {exc}"
            continue
        if not isinstance(data, dict):
            out.error = out.error or f"{CHECKPOINTS}/{path.name}: not a checkpoint object"
            continue
        rows.append((str(data.get("timestamp") or ""), str(data.get("checkpoint_id") or path.stem), data))
    rows.sort(key=lambda r: (r[0], r[1]))
    out.ids = [cid for _, cid, _ in rows]
    out.raw = [data for _, _, data in rows]
    return out


def commit_ids(session: Path) -> list[str]:
    """The session's checkpoints in commit order (the host numbers its new saves after them)."""
    return read_files(session).ids


def read_transcript(session: Path) -> Transcript:
    """The session's checkpoints as the canonical transcript (empty before the first)."""
    files = read_files(session)
    if not files.raw:
        return Transcript(integrity_error=files.error)
    from agent_framework._workflows._checkpoint_encoding import (  # noqa: PLC0415 - the extra
        decode_checkpoint_value,
    )
    decoded = []
    for cid, raw in zip(files.ids, files.raw, strict=True):
        try:
            # The storage's own decoder, with its default allow-list (framework and OpenAI types).
            decoded.append(decode_checkpoint_value(raw, allowed_types=frozenset()))
        except Exception as exc:  # the framework raises its own exception types, or pickle's
            return Transcript(integrity_error=f"{CHECKPOINTS}/{cid}.json: {type(exc).__name__}: {exc}")
    t = transcript_of(decoded)
    t.integrity_error = files.error
    return t


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def held(checkpoint: Mapping[str, Any]) -> list[Any]:
    """The messages one checkpoint holds: each agent's conversation and cache, then the inputs
    pending for an executor (a string or messages; an agent's response passed on to the next
    executor is left out: its messages are in that agent's conversation)."""
    out: list[Any] = []
    states = (checkpoint.get("state") or {}).get(EXECUTOR_STATE) or {}
    for executor_id in sorted(states):
        state = states[executor_id]
        if isinstance(state, Mapping):
            out += _list(state.get("full_conversation")) + _list(state.get("cache"))
    for source in sorted(checkpoint.get("messages") or {}):
        for pending in _list((checkpoint.get("messages") or {})[source]):
            data = getattr(pending, "data", pending)
            if isinstance(data, str):
                out.append(("user", data))
            elif _is_message(data):
                out.append(data)
            elif isinstance(data, list):
                out += [m for m in data if _is_message(m) or isinstance(m, str)]
    return _unique(out)


def _is_message(value: Any) -> bool:
    return hasattr(value, "role") and hasattr(value, "contents")


def _unique(messages: Iterable[Any]) -> list[Any]:
    """Messages in order, each said once (several agents' conversations overlap)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for m in messages:
        key = said(m)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def said(m: Any) -> tuple[str, ...]:
    """What a message says: role, text, the calls it makes, the calls it answers and how."""
    if isinstance(m, tuple):
        return (m[0], m[1], "[]", "[]")  # an input given as a string: a user message
    contents = list(getattr(m, "contents", None) or [])
    text = "".join(str(getattr(c, "text", None) or "") for c in contents
                   if getattr(c, "type", None) == "text")
    calls = json.dumps([(c.call_id, c.name, arguments_text(c.arguments)) for c in contents
                        if getattr(c, "type", None) == "function_call"], ensure_ascii=False)
    results = json.dumps([(c.call_id, result_text(c.result)) for c in contents
                          if getattr(c, "type", None) == "function_result"], ensure_ascii=False)
    return (str(getattr(m, "role", "")), text, calls, results)


def arguments_text(arguments: Any) -> str:
    """A call's arguments as sent on the wire: the model's own string, else JSON."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)


def result_text(result: Any) -> str:
    """A function result as the text the model is shown."""
    if isinstance(result, str):
        return result
    if isinstance(result, list):
        return "".join(str(getattr(c, "text", None) or c) for c in result)
    return "" if result is None else str(result)


def finished(checkpoint: Mapping[str, Any]) -> bool:
    """Nothing left to run: no message pending for an executor, no request waiting."""
    pending = checkpoint.get("messages") or {}
    return not any(_list(v) for v in pending.values()) and not checkpoint.get("pending_request_info_events")


def transcript_of(checkpoints: Sequence[Mapping[str, Any]]) -> Transcript:
    """The transcript of decoded checkpoints in commit order."""
    t = Transcript(commits=len(checkpoints),
                   labels={k: checkpoint_label(int(c.get("iteration_count") or 0))
                           for k, c in enumerate(checkpoints, 1)})
    placed: dict[tuple[tuple[str, ...], int], int] = {}  # (said, occurrence) -> first commit
    started: int | None = None
    done: int | None = None
    latest: list[Any] = []
    for seq, checkpoint in enumerate(checkpoints, 1):
        latest = held(checkpoint)
        if latest and started is None:
            started = seq
        for key in _occurrences(latest):
            placed.setdefault(key, seq)
        final = bool(latest) and _is_final(latest[-1])
        if done is None and started is not None and seq > started and final and finished(checkpoint):
            done = seq
        elif done is not None and not (final and finished(checkpoint)):
            done = None  # a later checkpoint runs again: the run was not over
    if started is None:
        return t
    names: dict[str, str] = {}
    for (m, key) in zip(latest, _occurrences(latest), strict=True):
        t.messages += _canonical(m, placed[key], len(t.messages), names)
    t.runs = [Run(RUN_ID, started, "prompt", outcome="completed" if done else None, finished_seq=done)]
    return t


def _occurrences(messages: Sequence[Any]) -> list[tuple[tuple[str, ...], int]]:
    counts: dict[tuple[str, ...], int] = {}
    out = []
    for m in messages:
        key = said(m)
        counts[key] = counts.get(key, 0) + 1
        out.append((key, counts[key]))
    return out


def _is_final(m: Any) -> bool:
    role, text, calls, _ = said(m)
    return role == "assistant" and calls == "[]" and bool(text)


def _canonical(m: Any, seq: int, before: int, names: dict[str, str]) -> list[Message]:
    """One framework message as canonical messages, in the form the Chat Completions wire has
    it (a tool message per function result; content None beside calls). Ids are positions."""
    if isinstance(m, tuple):
        return [Message(seq=seq, msg_id=f"m{before + 1}", run_id=RUN_ID, role="user", content=m[1])]
    role = str(m.role)
    contents = list(m.contents or [])
    results = [c for c in contents if c.type == "function_result"]
    if results:
        return [Message(seq=seq, msg_id=f"m{before + k}", run_id=RUN_ID, role="tool",
                        content=result_text(c.result), call_id=str(c.call_id),
                        tool=names.get(str(c.call_id)), is_error=c.exception is not None)
                for k, c in enumerate(results, 1)]
    calls = []
    for c in contents:
        if c.type == "function_call":
            raw = arguments_text(c.arguments)
            try:
                args = json.loads(raw)
            except ValueError:
                args = None  # kept raw: a call with broken arguments is still a call
            calls.append(Call(str(c.call_id), str(c.name), args, raw))
            names[str(c.call_id)] = str(c.name)
    text = "".join(c.text or "" for c in contents if c.type == "text")
    return [Message(seq=seq, msg_id=f"m{before + 1}", run_id=RUN_ID, role=role,
                    content=None if calls and not text else text, calls=tuple(calls))]
