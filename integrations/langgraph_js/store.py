"""The LangGraph.js `SqliteSaver` database as commits in order and as the canonical transcript.

`@langchain/langgraph-checkpoint-sqlite` (1.0) keeps two tables, like the Python saver but not
byte for byte: `checkpoints` (thread, namespace, id, parent, `type`, `checkpoint`, `metadata`)
and `writes` (thread, namespace, checkpoint id, task id, `idx`, channel, `type`, `value`), with
no `task_path` column. Its serializer writes JSON (`type` "json"): a message is LangChain.js's
serialized constructor, `{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs":
{...}}`, an absent field `{"lc": 2, "type": "undefined"}`, and the input as the caller gave it
(`{"role": "user", "content": ...}`). Nothing here needs Node or LangChain to read it.

A commit is one `put` (a checkpoint) or one `putWrites` (a task's writes, on the checkpoint the
task ran from). The order is the host's (`host.mjs`, which numbers each probe's `seq` the same
way): checkpoints by id (time-ordered), each followed by the writes saved on it in row order.
Labels: `checkpoint.<source>` from the checkpoint's metadata; `writes.<node>` for a node's task.
The table does not say which node a task was: its id is LangGraph's
`uuid5(checkpoint id, JSON.stringify([node, step, node, "__pregel_pull", [trigger]]))`, so the
reader computes it for each node the checkpoint could trigger (`__start__`, and every
`branch:to:<node>` channel) and names the one that matches (`writes.task` if none does).

The transcript, and what the invariants find in it, is as for the Python integration
(`integrations/langgraph/store.py`): the thread as one run; no intents (the adapter declares
`intent-before-effect` not applicable), no replay policies, no inbox, no retries.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.records.transcript import Call, Message, Run, Transcript
from crashmatrix.integrations.hosting import read_sqlite_copy

DB = "checkpoints.sqlite"  # in the session directory
# SQLite keeps committed pages in these beside the database (the saver runs in WAL mode).
COMPANIONS = ("-wal", "-shm", "-journal")
THREAD_FILE = "thread_id"  # the thread the session runs on, written by the first `run`
RUN_ID = "run-1"  # a thread is read as one run
MESSAGES = "messages"  # the state key of the chat history (MessagesAnnotation's)
PULL = "__pregel_pull"
START = "__start__"
BRANCH = "branch:to:"
INPUT = "__input__"  # LangGraph's INPUT: the task id of an input's writes derives from it
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# LangChain.js message classes (and the roles of dict input) as the canonical roles.
ROLES = {"HumanMessage": "user", "AIMessage": "assistant", "AIMessageChunk": "assistant",
         "ToolMessage": "tool", "SystemMessage": "system", "human": "user", "user": "user",
         "ai": "assistant", "assistant": "assistant", "tool": "tool", "system": "system"}

Key = tuple[str, ...]


def _token(text: str) -> str:
    """A label part safe in a case id (no '+', '/', spaces), as host.mjs makes it."""
    return _UNSAFE.sub("_", text).strip("_") or "none"


@dataclass(frozen=True)
class Commit:
    key: Key
    label: str


@dataclass
class _Rows:
    """The database's rows of one thread, in commit order."""

    commits: list[Commit] = field(default_factory=list)
    # per commit: the checkpoint (decoded JSON) or the writes' [(channel, value)]
    payloads: list[Any] = field(default_factory=list)


def task_id(checkpoint_id: str, node: str, step: int, trigger: str) -> str:
    """The id LangGraph.js gives the task that runs `node` from this checkpoint."""
    name = json.dumps([node, str(step), node, PULL, [trigger]], ensure_ascii=False, separators=(",", ":"))
    return str(uuid.uuid5(uuid.UUID(checkpoint_id), name))


def _task_labels(checkpoint_id: str, checkpoint: Mapping[str, Any], metadata: Mapping[str, Any]
                 ) -> dict[str, str]:
    """task id -> `writes.<node>` for every task this checkpoint could start."""
    step = int(metadata.get("step", -1)) + 1
    triggers = {START: START} if START in (checkpoint.get("channel_versions") or {}) else {}
    for channel in checkpoint.get("channel_versions") or {}:
        if isinstance(channel, str) and channel.startswith(BRANCH):
            triggers.setdefault(channel[len(BRANCH):], channel)
    labels = {task_id(checkpoint_id, node, step, trigger): f"writes.{_token(node)}"
              for node, trigger in triggers.items()}
    labels[str(uuid.uuid5(uuid.UUID(checkpoint_id), INPUT))] = "writes.input"
    return labels


def _json(value: Any) -> Any:
    if value is None:
        return None
    return json.loads(value.decode("utf-8") if isinstance(value, bytes) else value)


def _rows(conn: sqlite3.Connection, thread_id: str) -> _Rows:
    checkpoints = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, checkpoint, metadata FROM checkpoints WHERE thread_id = ? "
        "ORDER BY checkpoint_id, checkpoint_ns", (thread_id,)).fetchall()
    writes = conn.execute(
        "SELECT checkpoint_ns, checkpoint_id, task_id, channel, value FROM writes "
        "WHERE thread_id = ? ORDER BY rowid", (thread_id,)).fetchall()
    groups: dict[Key, list[tuple[str, Any]]] = {}
    anchored: dict[tuple[str, str], list[Key]] = {}
    for ns, cid, task, channel, value in writes:
        key: Key = ("writes", ns, cid, task)
        if key not in groups:
            groups[key] = []
            anchored.setdefault((ns, cid), []).append(key)
        groups[key].append((channel, value))
    out = _Rows()
    for ns, cid, blob, meta in checkpoints:
        checkpoint, metadata = _json(blob) or {}, _json(meta) or {}
        label = f"checkpoint.{_token(str(metadata.get('source') or 'none'))}"
        out.commits.append(Commit(("checkpoint", ns, cid), label))
        out.payloads.append(checkpoint)
        tasks = _task_labels(cid, checkpoint, metadata)
        for key in anchored.pop((ns, cid), []):
            out.commits.append(Commit(key, tasks.get(key[3], "writes.task")))
            out.payloads.append(groups[key])
    # Writes whose checkpoint is missing cannot happen in LangGraph's order; kept, last.
    for keys in anchored.values():
        for key in keys:
            out.commits.append(Commit(key, "writes.task"))
            out.payloads.append(groups[key])
    return out


def read_thread_id(session: Path) -> str | None:
    path = session / THREAD_FILE
    return path.read_text(encoding="utf-8").strip() if path.exists() else None


def read_transcript(session: Path) -> Transcript:
    """The session's store as the canonical transcript (empty before the first commit), read
    from a copy of the database and its companion files (reading never changes the session)."""
    thread_id = read_thread_id(session)
    db = session / DB
    if thread_id is None or not db.exists():
        return Transcript()
    try:
        rows = read_sqlite_copy(session, DB, COMPANIONS, "crashmatrix-langgraph-js-",
                                lambda conn: _rows(conn, thread_id))
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return Transcript()  # the saver makes its tables before its first write
        return Transcript(integrity_error=f"{DB}: {exc}")
    except (sqlite3.DatabaseError, ValueError) as exc:  # ValueError: a value that is not JSON
        return Transcript(integrity_error=f"{DB}: {exc}")
    return transcript_of(rows.commits, rows.payloads)


def plain(value: Any) -> Any:
    """LangChain.js's serialized form with its `undefined` markers dropped (a field it did not set)."""
    if isinstance(value, dict):
        if value.get("lc") == 2 and value.get("type") == "undefined":
            return None
        return {k: plain(v) for k, v in value.items()
                if not (isinstance(v, dict) and v.get("lc") == 2 and v.get("type") == "undefined")}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@dataclass(frozen=True)
class _Msg:
    """One message, whatever its form (a serialized class, or input as a dict)."""

    role: str
    content: Any
    msg_id: str | None
    tool_calls: tuple[Mapping[str, Any], ...]
    call_id: str | None
    name: str | None
    status: str | None

    @classmethod
    def of(cls, raw: Any) -> _Msg:
        m = plain(raw)
        if isinstance(m, dict) and m.get("lc") == 1 and isinstance(m.get("kwargs"), dict):
            kind = str((m.get("id") or ["?"])[-1])
            kw = m["kwargs"]
        else:
            kw = m if isinstance(m, dict) else {"content": str(m)}
            kind = str(kw.get("role") or kw.get("type") or "")
        return cls(ROLES.get(kind, kind), kw.get("content"), kw.get("id"),
                   tuple(c for c in kw.get("tool_calls") or [] if isinstance(c, dict)),
                   kw.get("tool_call_id"), kw.get("name"), kw.get("status"))

    def said(self) -> tuple[str, str, str, str]:
        """What it says, whatever its id: role, text, answered call, calls made."""
        calls = json.dumps([(c.get("id"), c.get("name"), c.get("args")) for c in self.tool_calls],
                           sort_keys=True, default=str)
        return (self.role, _text(self.content), str(self.call_id or ""), calls)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def transcript_of(commits: list[Commit], payloads: list[Any]) -> Transcript:
    """The transcript of commits in order and their payloads (as `_rows` reads them).

    A message is placed at the first commit that held it: a node's writes, matched by what the
    message says (a tool's message gets its id only when the reducer applies the write), else
    the checkpoint where it first appears.
    """
    t = Transcript(commits=len(commits), labels={k: c.label for k, c in enumerate(commits, 1)})
    placed: dict[str, int] = {}
    started: int | None = None
    latest: list[_Msg] = []
    pending: list[tuple[int, _Msg]] = []
    for seq, (commit, payload) in enumerate(zip(commits, payloads, strict=True), 1):
        if commit.key[1]:
            continue  # a subgraph's commit: its state is not the thread's history
        if commit.key[0] == "writes":
            for channel, value in payload:
                if channel != MESSAGES:
                    continue
                decoded = _json(value)
                pending += [(seq, _Msg.of(m)) for m in (decoded if isinstance(decoded, list) else [decoded])]
            continue
        if started is None:
            started = seq  # the first checkpoint: LangGraph saves it before anything else
        values = payload.get("channel_values") or {}
        latest = [_Msg.of(m) for m in values.get(MESSAGES) or []]
        for m in latest:
            mid = str(m.msg_id)
            if mid in placed:
                continue
            k = next((i for i, (_, w) in enumerate(pending) if w.said() == m.said()), None)
            placed[mid] = pending.pop(k)[0] if k is not None else seq
        pending = []
    if started is None:
        return t
    final = [(placed[str(m.msg_id)], m) for m in latest] + pending
    t.messages = [_message(k, m, seq) for k, (seq, m) in enumerate(final, 1)]
    done = bool(t.messages) and t.messages[-1].role == "assistant" and not t.messages[-1].calls
    t.runs = [Run(RUN_ID, started, "prompt", outcome="completed" if done else None,
                  finished_seq=t.messages[-1].seq if done else None)]
    return t


def _message(k: int, m: _Msg, seq: int) -> Message:
    """One message as the canonical message; ids are positions, so evidence is the same in every run.
    Arguments as ChatOpenAI.js sends them back (`JSON.stringify(args)`)."""
    calls = tuple(Call(str(c.get("id")), str(c.get("name")), c.get("args"),
                       json.dumps(c.get("args"), ensure_ascii=False, separators=(",", ":")))
                  for c in m.tool_calls)
    text = _text(m.content)
    tool = m.role == "tool"
    return Message(seq=seq, msg_id=f"m{k}", run_id=RUN_ID, role=m.role,
                   content=None if calls and not text else text, calls=calls,
                   call_id=str(m.call_id) if tool and m.call_id else None,
                   tool=str(m.name) if tool and m.name else None,
                   is_error=tool and m.status == "error")
