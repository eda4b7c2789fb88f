"""The `SqliteSaver` database as commits in order, and as the canonical transcript the verifier judges.

A commit is one write of the checkpointer: a checkpoint (`SqliteSaver.put`, label
`checkpoint.SOURCE`, e.g. `checkpoint.loop`) or one task's writes (`SqliteSaver.put_writes`,
label `writes.NODE`, e.g. `writes.tools`). The host's seams number them as they happen and this
module numbers the database's rows the same way, so a probe's `seq` is the transcript's:
checkpoints in `checkpoint_id` order (LangGraph's ids sort by time; it finds the latest that way
too), each followed by the writes anchored on it, in the order they were inserted. That is the
order LangGraph submits them in under `durability="sync"` with one worker (see `host`): a
checkpoint, then the writes of the tasks run from it, then the next checkpoint.

The transcript is the thread's latest state: the `messages` channel of its newest checkpoint,
plus the messages of writes saved on it that no checkpoint holds yet (a crash between a task's
writes and the next checkpoint leaves them there; LangGraph applies them when it resumes). Each
message is placed at the first commit that held it.

What a LangGraph store cannot give, so what the invariants reading it find (the adapter declares
`intent-before-effect` not applicable; the others judge what they can):
- runs: LangGraph has threads, not runs; a thread is read as one run (`run-1`) started by the
  commit that saved its input and completed once its last message is a final answer. There is
  no resume record, so `resume-budget` has nothing to count (LangGraph has no resume budget)
  and holds vacuously; `finished-stays-finished` is judged on that reading.
- intents: LangGraph records nothing before a tool runs (no `tool_started`), so
  `intent-before-effect` has nothing to order (the adapter declares it not applicable): it is
  the missing record that lets a crash after the effect run the tool again (`at-most-once`).
  `safe-rerun` and `reserved-result` have no replay policies or reserved result ids to read.
- inboxes and retries: none (`queued-input`, `retry-intent`: nothing to judge).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.records.transcript import Call, Message, Run, Transcript
from crashmatrix.integrations.hosting import read_sqlite_copy

DB = "checkpoints.sqlite"  # in the session directory
# SQLite keeps committed pages in these beside the database (WAL mode, or a hot rollback
# journal after a crash): a copy without them would lose what a real crash keeps.
COMPANIONS = ("-wal", "-shm", "-journal")
THREAD_FILE = "thread_id"  # the thread the session runs on, written by the first `run`
RUN_ID = "run-1"  # a thread is read as one run
MESSAGES = "messages"  # the state key of the chat history (MessagesState's)
PULL = "~__pregel_pull"  # task_path prefix of a task that runs a node
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

Key = tuple[str, ...]


def checkpoint_key(ns: str, checkpoint_id: str) -> Key:
    return ("checkpoint", ns, checkpoint_id)


def writes_key(ns: str, checkpoint_id: str, task_id: str) -> Key:
    return ("writes", ns, checkpoint_id, task_id)


def _token(text: str) -> str:
    """A label part safe in a case id (no '+', '/', spaces)."""
    return _UNSAFE.sub("_", text).strip("_") or "none"


def checkpoint_label(metadata: Mapping[str, Any]) -> str:
    return f"checkpoint.{_token(str(metadata.get('source') or 'none'))}"


def writes_label(task_path: str) -> str:
    parts = [p.strip() for p in task_path.split(",")]
    node = parts[1] if len(parts) > 1 and parts[0] == PULL else "task"
    return f"writes.{_token(node)}"


@dataclass(frozen=True)
class Commit:
    key: Key
    label: str


@dataclass
class _Rows:
    """The database's rows of one thread, in commit order (decoded only when asked)."""

    commits: list[Commit] = field(default_factory=list)
    # per commit: (checkpoint type, blob) or the writes' [(channel, type, blob)]
    payloads: list[Any] = field(default_factory=list)


def _rows(conn: sqlite3.Connection, thread_id: str, *, payloads: bool) -> _Rows:
    blob = ", type, checkpoint" if payloads else ""
    checkpoints = conn.execute(
        f"SELECT checkpoint_ns, checkpoint_id, metadata{blob} FROM checkpoints WHERE thread_id = ? "
        "ORDER BY checkpoint_id, checkpoint_ns", (thread_id,)).fetchall()
    writes = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, task_id, task_path, channel, type, value FROM writes "
        "WHERE thread_id = ? ORDER BY rowid", (thread_id,)).fetchall()
    groups: dict[Key, tuple[str, list[tuple[str, str, bytes]]]] = {}
    anchored: dict[tuple[str, str], list[Key]] = {}
    for ns, cid, task, path, channel, type_, value in writes:
        key = writes_key(ns, cid, task)
        if key not in groups:
            groups[key] = (writes_label(path or ""), [])
            anchored.setdefault((ns, cid), []).append(key)
        groups[key][1].append((channel, type_, value))
    out = _Rows()
    for row in checkpoints:
        ns, cid, meta = row[0], row[1], row[2]
        metadata = json.loads(meta) if meta else {}
        out.commits.append(Commit(checkpoint_key(ns, cid), checkpoint_label(metadata)))
        out.payloads.append((row[3], row[4]) if payloads else None)
        for key in anchored.pop((ns, cid), []):
            label, items = groups[key]
            out.commits.append(Commit(key, label))
            out.payloads.append(items)
    # Writes whose checkpoint is missing cannot happen in LangGraph's order; kept, last.
    for keys in anchored.values():
        for key in keys:
            label, items = groups[key]
            out.commits.append(Commit(key, label))
            out.payloads.append(items)
    return out


def commits(conn: sqlite3.Connection, thread_id: str) -> list[Commit]:
    """The thread's commits in order (the host numbers its new writes after them)."""
    return _rows(conn, thread_id, payloads=False).commits


def read_thread_id(session: Path) -> str | None:
    path = session / THREAD_FILE
    return path.read_text(encoding="utf-8").strip() if path.exists() else None


def read_transcript(session: Path) -> Transcript:
    """The session's store as the canonical transcript (empty before the first commit).

    Reads a copy of the database and its companion files, so that reading never changes the
    session (opening a WAL database may checkpoint it into the main file on close).
    """
    thread_id = read_thread_id(session)
    db = session / DB
    if thread_id is None or not db.exists():
        return Transcript()
    try:
        rows = read_sqlite_copy(session, DB, COMPANIONS, "crashmatrix-langgraph-",
                                lambda conn: _rows(conn, thread_id, payloads=True))
    except sqlite3.DatabaseError as exc:
        return Transcript(integrity_error=f"{DB}: {exc}")
    return transcript_of(rows.commits, rows.payloads)


def transcript_of(commits: list[Commit], payloads: list[Any]) -> Transcript:
    """The transcript of commits in order and their payloads (as `_rows` reads them).

    A message is placed at the first commit that held it. Messages are matched by what they
    say, not by id: a node's messages usually have no id when its writes are saved, and
    LangGraph's reducer gives them one as it applies the writes, on the main thread while a
    worker serialises the same objects, so whether a saved write holds the id is a race.
    """
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: PLC0415 - the extra

    serde = JsonPlusSerializer()
    t = Transcript(commits=len(commits), labels={k: c.label for k, c in enumerate(commits, 1)})
    placed: dict[str, int] = {}  # id of a message in a checkpoint -> the commit that first held it
    started: int | None = None  # the commit that saved the thread's input
    latest: list[Any] = []  # the newest checkpoint's messages
    pending: list[tuple[int, Any]] = []  # (seq, message) written since it, not applied yet
    for seq, (commit, payload) in enumerate(zip(commits, payloads, strict=True), 1):
        if commit.key[1]:
            continue  # a subgraph's commit: its state is not the thread's history
        if commit.key[0] == "writes":
            pending += [(seq, m) for channel, type_, blob in payload if channel == MESSAGES
                        for m in _as_list(serde.loads_typed((type_, blob)))]
            continue
        if started is None:
            started = seq  # the first checkpoint holds the input (LangGraph saves it first)
        latest = list(serde.loads_typed(payload).get("channel_values", {}).get(MESSAGES) or [])
        for m in latest:
            mid = str(getattr(m, "id", None))
            if mid in placed:
                continue
            # New here: written by a task since the previous checkpoint, or by the reducer.
            k = next((i for i, (_, w) in enumerate(pending) if _said(w) == _said(m)), None)
            placed[mid] = pending.pop(k)[0] if k is not None else seq
        pending = []
    if started is None:
        return t
    final = [(placed[str(getattr(m, "id", None))], m) for m in latest] + pending
    t.messages = [_message(k, m, seq) for k, (seq, m) in enumerate(final, 1)]
    done = bool(t.messages) and t.messages[-1].role == "assistant" and not t.messages[-1].calls
    t.runs = [Run(RUN_ID, started, "prompt", outcome="completed" if done else None,
                  finished_seq=t.messages[-1].seq if done else None)]
    return t


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _said(m: Any) -> tuple[str, str, str, str]:
    """What a message says, whatever its id: role, content, answered call, calls made. A write
    may hold a message as LangChain input (a dict) rather than a message object."""
    if isinstance(m, dict):
        role = str(m.get("role") or m.get("type") or "")
        return (ROLES.get(role, role), str(m.get("content") or ""), str(m.get("tool_call_id") or ""), "[]")
    kind = str(getattr(m, "type", ""))
    calls = json.dumps([(c.get("id"), c.get("name"), c.get("args"))
                        for c in getattr(m, "tool_calls", None) or []], sort_keys=True, default=str)
    return (ROLES.get(kind, kind), str(getattr(m, "content", "")),
            str(getattr(m, "tool_call_id", "") or ""), calls)


# LangChain message types (and the roles of dict input) as the canonical roles.
ROLES = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "tool": "tool",
         "system": "system"}


def _message(k: int, m: Any, seq: int) -> Message:
    """One LangChain message as the canonical message, in the form ChatOpenAI sends it back
    (the continuation check compares requests with it): content None beside tool calls, the
    arguments as `json.dumps(args, ensure_ascii=False)`. Ids are positions, not LangChain's
    random ids, so a result's evidence is the same in every run."""
    role = ROLES.get(str(getattr(m, "type", "")), str(getattr(m, "type", "")))
    content = m.content if isinstance(m.content, str) else str(getattr(m, "text", m.content))
    calls = tuple(
        Call(str(c["id"]), str(c["name"]), c["args"], json.dumps(c["args"], ensure_ascii=False))
        for c in getattr(m, "tool_calls", None) or [])
    text: str | None = None if calls and not content else content
    call_id = getattr(m, "tool_call_id", None) if role == "tool" else None
    return Message(seq=seq, msg_id=f"m{k}", run_id=RUN_ID, role=role, content=text, calls=calls,
                   call_id=str(call_id) if call_id else None,
                   tool=str(getattr(m, "name", None)) if role == "tool" and getattr(m, "name", None)
                   else None,
                   is_error=role == "tool" and getattr(m, "status", "success") == "error")
