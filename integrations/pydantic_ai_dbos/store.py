"""DBOS's SQLite system database as commits in order, and as the canonical transcript the verifier judges.

The session holds one workflow, `WORKFLOW_ID` (the host starts `agent.run` under that id). Its
commits, the writes DBOS's recovery reads back, are numbered in this order, which is the order
the workflow makes them, so a probe's `seq` (the host's seams number the writes as they happen)
is the transcript's:
- `workflow.start`: the `workflow_status` row inserted when the workflow starts, with its
  inputs (the task);
- `step.NAME`: each recorded step, a row of `operation_outputs` (`NAME` is DBOS's step name,
  e.g. `changelog__model.request` for a model request), by `function_id`;
- `workflow.success` (or `workflow.error`): the workflow's outcome, with its output.
DBOS writes more than that (schema versions, the application version, a recovery's re-enqueue
and dequeue, its attempt count): bookkeeping that holds none of the agent's state, not a commit.

The transcript: the user's task (from the workflow's inputs) at commit 1; each model response
(a model-request step's output) at its step's commit; the tool results at the outcome's commit,
the first that holds them: DBOS records a step's output, never its inputs, and the plain function
tools are no steps, so their results are saved only in the workflow's output (the run's whole
message history), once the workflow has finished. The workflow is one run (`run-1`, intent
`prompt`), completed at the outcome's commit when the workflow's status is SUCCESS.

What a DBOS store cannot give, so what the invariants reading it find (the adapter declares
the first not applicable):
- intents: nothing is recorded before a tool runs, nor after: a tool is no step. Recovery
  re-executes the workflow from its start, replays the recorded model responses and runs every
  tool again: the missing record is what `at-most-once` finds.
- resumes: no resume record (`resume-budget` has nothing to count; DBOS counts recovery attempts,
  but as bookkeeping, with a limit of its own); no replay policies or reserved result ids
  (`safe-rerun`, `reserved-result`); no inboxes or retries (`queued-input`, `retry-intent`).
Step outputs are pickles (DBOS's default serializer): reading them imports Pydantic AI (the extra).
"""

from __future__ import annotations

import base64
import pickle
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.records.transcript import Call, Message, Run, Transcript
from crashmatrix.integrations.hosting import read_sqlite_copy

DB = "dbos.sqlite"  # DBOS's system database, in the session directory
# SQLite keeps committed pages in these beside the database (WAL mode, or a hot rollback
# journal after a crash): a copy without them would lose what a real crash keeps.
COMPANIONS = ("-wal", "-shm", "-journal")
WORKFLOW_ID = "crashmatrix-run"  # the session's one workflow (a session is one task)
RUN_ID = "run-1"
MODEL_STEPS = ("__model.request", "__model.request_stream")
FINAL = {"SUCCESS": "workflow.success", "ERROR": "workflow.error"}
PICKLE = "py_pickle"  # DBOS's default serializer
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

Key = tuple[str, ...]
START_KEY: Key = ("workflow", WORKFLOW_ID)
OUTCOME_KEY: Key = ("outcome", WORKFLOW_ID)


def token(text: str) -> str:
    """A label part safe in a case id (no '+', '/', spaces)."""
    return _UNSAFE.sub("_", text).strip("_") or "none"


def step_key(workflow_id: str, function_id: int) -> Key:
    return ("step", workflow_id, str(function_id))


def step_label(function_name: str) -> str:
    return f"step.{token(function_name)}"


@dataclass(frozen=True)
class Commit:
    key: Key
    label: str


@dataclass
class Rows:
    """The workflow's commits in order, with their payloads (decoded only when asked)."""

    commits: list[Commit] = field(default_factory=list)
    # per commit: the serialized value and its serialization (the inputs, a step's output or
    # error, the workflow's output or error)
    payloads: list[tuple[str | None, str | None, bool]] = field(default_factory=list)
    status: str | None = None


def _rows(conn: sqlite3.Connection) -> Rows:
    out = Rows()
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "workflow_status" not in tables:
        return out  # the schema is made at the first launch, before any commit
    found = conn.execute("SELECT status, inputs, output, error, serialization FROM workflow_status "
                         "WHERE workflow_uuid = ?", (WORKFLOW_ID,)).fetchone()
    if found is None:
        return out
    status, inputs, output, error, serialization = found
    if inputs is None and "workflow_input" in tables:  # newer schemas keep them apart
        row = conn.execute("SELECT inputs FROM workflow_input WHERE workflow_uuid = ?",
                           (WORKFLOW_ID,)).fetchone()
        inputs = row[0] if row else None
    if output is None and error is None and "workflow_output" in tables:
        row = conn.execute("SELECT output, error FROM workflow_output WHERE workflow_uuid = ?",
                           (WORKFLOW_ID,)).fetchone()
        output, error = (row[0], row[1]) if row else (None, None)
    out.status = status
    out.commits.append(Commit(START_KEY, "workflow.start"))
    out.payloads.append((inputs, serialization, False))
    for function_id, name, step_output, step_error, step_ser in conn.execute(
            "SELECT function_id, function_name, output, error, serialization FROM operation_outputs "
            "WHERE workflow_uuid = ? ORDER BY function_id", (WORKFLOW_ID,)):
        out.commits.append(Commit(step_key(WORKFLOW_ID, int(function_id)), step_label(str(name))))
        out.payloads.append((step_output if step_error is None else step_error, step_ser,
                             step_error is not None))
    if status in FINAL:
        out.commits.append(Commit(OUTCOME_KEY, FINAL[status]))
        out.payloads.append((output if error is None else error, serialization, error is not None))
    return out


def commits(conn: sqlite3.Connection) -> list[Commit]:
    """The workflow's commits in order (the host numbers its new writes after them)."""
    return _rows(conn).commits


def read_rows(session: Path) -> Rows | str:
    """The session's rows, read from a copy of the database and its companion files (reading
    never changes the session: closing a WAL database may checkpoint it), or what is wrong."""
    if not (session / DB).exists():
        return Rows()
    try:
        rows: Rows = read_sqlite_copy(session, DB, COMPANIONS, "crashmatrix-dbos-", _rows)
    except sqlite3.DatabaseError as exc:
        return f"{DB}: {exc}"
    return rows


def read_transcript(session: Path) -> Transcript:
    """The session's store as the canonical transcript (empty before the first commit)."""
    rows = read_rows(session)
    if isinstance(rows, str):
        return Transcript(integrity_error=rows)
    try:
        return transcript_of(rows)
    except (ValueError, TypeError, pickle.UnpicklingError, AttributeError, EOFError) as exc:
        t = Transcript(commits=len(rows.commits),
                       labels={k: c.label for k, c in enumerate(rows.commits, 1)})
        t.integrity_error = f"{DB}: a commit does not decode ({type(exc).__name__}: {exc})"
        return t


def _load(value: str | None, serialization: str | None) -> Any:
    if value is None:
        return None
    if serialization not in (None, PICKLE):
        raise ValueError(f"serialization {serialization!r} is not DBOS's default")
    return pickle.loads(base64.b64decode(value))  # the session's own store, written by DBOS


def transcript_of(rows: Rows) -> Transcript:
    """The transcript of the workflow's commits (see the module docstring)."""
    from pydantic_ai.messages import ModelRequest, ModelResponse  # noqa: PLC0415 - the extra

    t = Transcript(commits=len(rows.commits), labels={k: c.label for k, c in enumerate(rows.commits, 1)})
    if not rows.commits:
        return t
    inputs = _load(*rows.payloads[0][:2]) or {}
    args, kwargs = tuple(inputs.get("args") or ()), dict(inputs.get("kwargs") or {})
    prompt = args[0] if args else kwargs.get("user_prompt")
    # Each model response, at the commit of the step that recorded it.
    responses: list[tuple[int, Any]] = []
    for seq, (commit, (value, ser, failed)) in enumerate(zip(rows.commits, rows.payloads, strict=True), 1):
        if commit.key[0] == "step" and not failed and commit.label.endswith(
                tuple(token(s) for s in MODEL_STEPS)):
            response = _load(value, ser)
            if isinstance(response, ModelResponse):
                responses.append((seq, response))
    history: list[tuple[int, Any]] = []
    outcome_seq = len(rows.commits) if rows.commits[-1].key == OUTCOME_KEY else None
    output = None
    if outcome_seq is not None and not rows.payloads[-1][2]:
        output = _load(*rows.payloads[-1][:2])
    messages = list(output.all_messages()) if output is not None and hasattr(output, "all_messages") else []
    if messages:
        # The whole history is in the output: place each part at the first commit that held it.
        answered = iter(responses)
        for m in messages:
            if isinstance(m, ModelResponse):
                held = next(answered, None)
                history.append((held[0] if held is not None else outcome_seq or 1, m))
            else:
                history.append((outcome_seq or 1, m))
    else:
        history = list(responses)
    out: list[Message] = []
    if prompt is not None:
        out.append(_text_message(len(out), 1, "user", _prompt_text(prompt)))
    task_placed = prompt is not None  # the history's first user prompt is that task
    for seq, m in history:
        if isinstance(m, ModelResponse):
            out.append(_response(len(out), seq, m))
        elif isinstance(m, ModelRequest):
            out += _request_parts(len(out), seq, m, skip_prompt=task_placed)
            task_placed = False
    t.messages = out
    done = rows.status == "SUCCESS" and outcome_seq is not None
    t.runs = [Run(RUN_ID, 1, "prompt", outcome="completed" if done else
                  ("failed" if rows.status == "ERROR" else None),
                  finished_seq=outcome_seq if rows.status in FINAL else None)]
    return t


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        return "".join(p for p in prompt if isinstance(p, str))
    return str(prompt)


def _text_message(k: int, seq: int, role: str, content: str | None) -> Message:
    return Message(seq=seq, msg_id=f"m{k + 1}", run_id=RUN_ID, role=role, content=content)


def _response(k: int, seq: int, m: Any) -> Message:
    """A model response as the assistant message OpenAIChatModel sends back: its text (None
    beside tool calls when there is none), its calls with the arguments as sent."""
    from pydantic_ai.messages import TextPart, ToolCallPart  # noqa: PLC0415 - the extra

    text = "".join(p.content for p in m.parts if isinstance(p, TextPart))
    calls = tuple(Call(str(p.tool_call_id), str(p.tool_name), _args(p), p.args_as_json_str())
                  for p in m.parts if isinstance(p, ToolCallPart))
    return Message(seq=seq, msg_id=f"m{k + 1}", run_id=RUN_ID, role="assistant",
                   content=None if calls and not text else text, calls=calls)


def _args(part: Any) -> Any:
    try:
        return part.args_as_dict()
    except (ValueError, TypeError, AssertionError):
        return None  # kept raw: a call with broken arguments is still a call


def _request_parts(start: int, seq: int, m: Any, *, skip_prompt: bool) -> list[Message]:
    """A model request's parts: tool results (and retry prompts for a tool) as tool messages,
    a user prompt as a user message (unless it is the task, placed already: `skip_prompt`)."""
    from pydantic_ai.messages import RetryPromptPart, ToolReturnPart, UserPromptPart  # noqa: PLC0415

    found: list[Message] = []
    for p in m.parts:
        k = start + len(found)
        if isinstance(p, ToolReturnPart):
            found.append(Message(seq=seq, msg_id=f"m{k + 1}", run_id=RUN_ID, role="tool",
                                 content=p.model_response_str(), call_id=str(p.tool_call_id),
                                 tool=str(p.tool_name)))
        elif isinstance(p, RetryPromptPart) and p.tool_name is not None:
            found.append(Message(seq=seq, msg_id=f"m{k + 1}", run_id=RUN_ID, role="tool",
                                 content=p.model_response(), call_id=str(p.tool_call_id),
                                 tool=str(p.tool_name), is_error=True))
        elif isinstance(p, UserPromptPart):
            if skip_prompt:
                skip_prompt = False
                continue
            found.append(_text_message(k, seq, "user", _prompt_text(p.content)))
    return found
