"""The `SQLiteSession` database as commits in order, and as the canonical transcript the verifier judges.

A commit is one `SQLiteSession.add_items` call: one SQLite transaction inserting that call's items
as rows of `agent_messages`, numbered by their `id`. The table does not say which rows one call
inserted, so this module regroups them by the order the SDK (0.24) writes a turn in, which the
host's seams number the same way (a probe's `seq` is the transcript's):
- the input of a run (a user message) is one write, made before the first model request;
- a model turn's output (an assistant message, reasoning, function calls) and the outputs of the
  tools it called are one write, made after the tools ran;
so a commit starts at every input message, and at every model output item that does not follow
another model output item. Labels name the items in order: `message.user`,
`call.append_note,result.append_note`, `message.assistant`.

The transcript: each input message starts a run (`run-1`, `run-2`, ...; intent `prompt`: the SDK
has no resume record). A run ends `completed` at the commit of a final answer (an assistant
message with no calls after it); a run that a new input finds open ends `aborted` there (a
restart that re-sends its input starts a new run: the SDK keeps no link between the two).

What an Agents SDK session cannot give, so what the invariants reading it find (the harness has
no per-adapter "not applicable" yet; the report of issue 15 names the change):
- intents: nothing is saved before a tool runs: the call itself is saved with its result, after
  the effect. `intent-before-effect` reports every effect, as for the messages-only baseline,
  and that missing record is what lets a crash after the effect run the tool again
  (`at-most-once`). `safe-rerun` and `reserved-result` have no replay policies or reserved result
  ids to read.
- effects before their call's commit: the verifier charges an effect event to a call site whose
  call was committed before it ran, which the SDK never does, so effect events are charged to no
  call site and `no-silent-success` finds no effect backing a successful result.
- resumes: no resume record, so `resume-budget` has nothing to count (the SDK has no resume
  budget) and holds vacuously.
- inboxes and retries: none (`queued-input`, `retry-intent`: nothing to judge).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.records.transcript import Call, Message, Run, Transcript
from crashmatrix.integrations.hosting import read_sqlite_copy

DB = "session.sqlite"  # in the session directory
SESSION_ID = "crashmatrix"  # the SDK session's id (one per session directory)
MESSAGES_TABLE = "agent_messages"  # SQLiteSession's default
# SQLiteSession runs SQLite in WAL mode: committed pages live in these beside the database until
# a checkpoint; a copy without them would lose what a real crash keeps.
COMPANIONS = ("-wal", "-shm", "-journal")
INPUT_ROLES = ("user", "system", "developer")
MODEL_TYPES = ("function_call", "reasoning")
# The SDK's default failure text for a tool that raised (agents.tool.default_tool_error_function).
TOOL_ERROR_PREFIX = "An error occurred while running the tool"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

Item = Mapping[str, Any]


def _token(text: str) -> str:
    """A label part safe in a case id (no '+', '/', spaces)."""
    return _UNSAFE.sub("_", text).strip("_") or "none"


def is_input(item: Item) -> bool:
    """An input message (the user's, or a system/developer message a caller put in the input)."""
    return item.get("type", "message") == "message" and item.get("role") in INPUT_ROLES


def is_model_output(item: Item) -> bool:
    return item.get("type") in MODEL_TYPES or (
        item.get("type", "message") == "message" and item.get("role") == "assistant")


def item_label(item: Item, names: Mapping[str, str]) -> str:
    """One item's part of a commit label; `names`: call id -> tool name (for results)."""
    kind = str(item.get("type", "message"))
    if kind == "message":
        return f"message.{_token(str(item.get('role')))}"
    if kind == "function_call":
        return f"call.{_token(str(item.get('name')))}"
    if kind == "function_call_output":
        return f"result.{_token(names.get(str(item.get('call_id')), 'unknown'))}"
    return _token(kind)


def commit_label(items: Sequence[Item], names: Mapping[str, str] | None = None) -> str:
    """The label of one write of these items (its own calls name its results' tools)."""
    known = dict(names or {})
    known.update({str(i.get("call_id")): str(i.get("name")) for i in items
                  if i.get("type") == "function_call"})
    return ",".join(item_label(i, known) for i in items)


def group(items: Sequence[Item]) -> list[list[Item]]:
    """The session's items as the writes that made them (see the module docstring)."""
    commits: list[list[Item]] = []
    previous: Item | None = None
    for item in items:
        starts = (previous is None or is_input(item)
                  or (is_model_output(item) and not is_model_output(previous)))
        if starts:
            commits.append([])
        commits[-1].append(item)
        previous = item
    return commits


def labels(commits: Sequence[Sequence[Item]]) -> list[str]:
    names: dict[str, str] = {}
    out = []
    for items in commits:
        out.append(commit_label(items, names))
        names.update({str(i.get("call_id")): str(i.get("name")) for i in items
                      if i.get("type") == "function_call"})
    return out


@dataclass
class Rows:
    """The session's items in row order, and what could not be decoded."""

    items: list[Item] = field(default_factory=list)
    error: str | None = None


def read_items(session: Path) -> Rows:
    """The items of the session's SDK session, read from a copy of the database and its
    companion files, so that reading never changes the session (closing a WAL database may
    checkpoint it into the main file)."""
    db = session / DB
    if not db.exists():
        return Rows()
    def select(conn: sqlite3.Connection) -> list[Any]:
        return conn.execute(f"SELECT id, message_data FROM {MESSAGES_TABLE} WHERE session_id = ? "
                            "ORDER BY id", (SESSION_ID,)).fetchall()

    try:
        rows = read_sqlite_copy(session, DB, COMPANIONS, "crashmatrix-openai-agents-", select)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return Rows()  # the schema is made before the first write: nothing saved yet
        return Rows(error=f"{DB}: {exc}")
    except sqlite3.DatabaseError as exc:
        return Rows(error=f"{DB}: {exc}")
    out = Rows()
    for row_id, data in rows:
        try:
            item = json.loads(data)
        except (TypeError, ValueError):
            # The SDK skips such a row when it reads the session: the history it sends has lost it.
            out.error = out.error or f"{DB}: row {row_id} of {MESSAGES_TABLE} is not JSON"
            continue
        if isinstance(item, dict):
            out.items.append(item)
        else:
            out.error = out.error or f"{DB}: row {row_id} of {MESSAGES_TABLE} is not an item object"
    return out


def pending_input(items: Sequence[Item]) -> str | None:
    """The text of the session's newest user input, unless its final answer is saved (None:
    nothing to deliver again, or no input at all): what a restart runs again (see `host`)."""
    if not items or (is_model_output(items[-1]) and items[-1].get("type", "message") == "message"):
        return None
    for item in reversed(items):
        if is_input(item) and item.get("role") == "user":
            return text_of(item.get("content"))
    return None


def read_transcript(session: Path) -> Transcript:
    """The session's store as the canonical transcript (empty before the first commit)."""
    rows = read_items(session)
    t = transcript_of(rows.items)
    t.integrity_error = rows.error
    return t


def text_of(content: Any) -> str:
    """A message's or a tool output's text: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _call(item: Item) -> Call:
    raw = str(item.get("arguments", ""))
    try:
        args = json.loads(raw)
    except ValueError:
        args = None  # kept raw: a call with broken arguments is still a call
    return Call(str(item.get("call_id")), str(item.get("name")), args, raw)


def transcript_of(items: Sequence[Item]) -> Transcript:
    """The transcript of the session's items in row order."""
    commits = group(items)
    t = Transcript(commits=len(commits), labels={k: lab for k, lab in enumerate(labels(commits), 1)})
    names: dict[str, str] = {}
    open_run: Run | None = None
    runs: list[Run] = []

    def close(run: Run, outcome: str, seq: int, reason: str | None = None) -> None:
        runs[runs.index(run)] = Run(run.run_id, run.seq, run.intent, outcome=outcome, reason=reason,
                                    finished_seq=seq)

    for seq, batch in enumerate(commits, 1):
        k = 0
        while k < len(batch):
            item = batch[k]
            run_id = open_run.run_id if open_run else (runs[-1].run_id if runs else "run-0")
            if is_input(item):
                if open_run is not None:
                    close(open_run, "aborted", seq, "a new input arrived before the run's final answer")
                open_run = Run(f"run-{len(runs) + 1}", seq, "prompt")
                runs.append(open_run)
                t.messages.append(Message(seq, f"m{len(t.messages) + 1}", open_run.run_id,
                                          str(item.get("role")), text_of(item.get("content"))))
                k += 1
            elif is_model_output(item):
                # One model turn: its message and the calls right after it, as the wire reads it.
                turn = []
                while k < len(batch) and is_model_output(batch[k]):
                    turn.append(batch[k])
                    k += 1
                calls = tuple(_call(i) for i in turn if i.get("type") == "function_call")
                names.update({c.call_id: c.tool for c in calls})
                text = "".join(text_of(i.get("content")) for i in turn
                               if i.get("type", "message") == "message")
                t.messages.append(Message(seq, f"m{len(t.messages) + 1}", run_id, "assistant",
                                          None if calls and not text else text, calls))
                if not calls and open_run is not None:
                    close(open_run, "completed", seq)
                    open_run = None
            else:
                call_id = str(item.get("call_id")) if item.get("call_id") is not None else None
                output = text_of(item.get("output"))
                t.messages.append(Message(seq, f"m{len(t.messages) + 1}", run_id, "tool", output,
                                          call_id=call_id, tool=names.get(call_id or ""),
                                          is_error=output.startswith(TOOL_ERROR_PREFIX)))
                k += 1
    t.runs = runs
    return t
