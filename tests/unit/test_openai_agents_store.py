"""The Agents SDK session reader: items regrouped into the SDK's writes, labels, runs, restarts.

The items are the ones `SQLiteSession` (openai-agents 0.24) saved for the changelog-fast script;
the reader needs no SDK, so these run without the extra.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from crashmatrix.harness.adapters.interface import Capability
from crashmatrix.integrations.openai_agents import store
from crashmatrix.integrations.openai_agents.adapter import ADAPTER

TASK = "Append the line '修复登录超时' to CHANGELOG.md, then run the tests and report the result."
USER = {"content": TASK, "role": "user"}
APPEND = {"arguments": '{"path": "CHANGELOG.md", "line": "修复登录超时"}', "call_id": "call_0",
          "name": "append_note", "type": "function_call", "id": "fc_a_0", "status": "completed"}
APPENDED = {"call_id": "call_0", "output": "appended 1 line to CHANGELOG.md", "type": "function_call_output"}
BASH = {"arguments": '{"command": "echo 1 passed"}', "call_id": "call_1", "name": "bash",
        "type": "function_call", "id": "fc_b_0", "status": "completed"}
RAN = {"call_id": "call_1", "output": "exit code 0\n1 passed\n", "type": "function_call_output"}
FINAL = {"id": "msg_c", "role": "assistant", "status": "completed", "type": "message",
         "content": [{"annotations": [], "text": "Added it. Tests: 1 passed", "type": "output_text",
                      "logprobs": []}]}
WRITES: list[list[dict[str, Any]]] = [[USER], [APPEND, APPENDED], [BASH, RAN], [FINAL]]


def flat(writes: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [item for write in writes for item in write]


def test_items_are_regrouped_into_the_writes_that_made_them() -> None:
    assert store.group(flat(WRITES)) == WRITES
    assert store.labels(WRITES) == ["message.user", "call.append_note,result.append_note",
                                    "call.bash,result.bash", "message.assistant"]
    # A re-sent input is a write of its own, even right after another input.
    assert store.group(flat([[USER], [USER], [APPEND, APPENDED]])) == [[USER], [USER], [APPEND, APPENDED]]


def test_a_whole_run_is_one_completed_run_with_paired_calls() -> None:
    t = store.transcript_of(flat(WRITES))
    assert t.commits == 4
    assert t.labels[2] == "call.append_note,result.append_note"
    assert [(r.run_id, r.outcome, r.finished_seq) for r in t.runs] == [("run-1", "completed", 4)]
    roles = [(m.seq, m.role, m.call_id) for m in t.messages]
    assert roles == [(1, "user", None), (2, "assistant", None), (2, "tool", "call_0"),
                     (3, "assistant", None), (3, "tool", "call_1"), (4, "assistant", None)]
    call = t.messages[1]
    assert call.content is None
    assert call.calls[0].tool == "append_note"
    assert call.calls[0].args == {"path": "CHANGELOG.md", "line": "修复登录超时"}
    # The wire form the continuation check compares requests with: chat-shaped, as the fake's view.
    assert t.messages[2].wire() == {"role": "tool", "tool_call_id": "call_0",
                                    "content": "appended 1 line to CHANGELOG.md"}
    assert t.messages[-1].content == "Added it. Tests: 1 passed"


def test_a_restart_that_resends_the_input_aborts_the_run_it_found_open() -> None:
    t = store.transcript_of(flat([[USER], [USER], [APPEND, APPENDED], [FINAL]]))
    assert [(r.run_id, r.seq, r.outcome, r.finished_seq) for r in t.runs] == [
        ("run-1", 1, "aborted", 2), ("run-2", 2, "completed", 4)]
    assert {m.run_id for m in t.messages[1:]} == {"run-2"}


def test_what_a_restart_delivers_again() -> None:
    assert store.pending_input([]) is None
    assert store.pending_input(flat(WRITES)) is None  # answered: nothing to do
    assert store.pending_input([USER]) == TASK
    assert store.pending_input(flat(WRITES[:2])) == TASK
    parts = {"role": "user", "type": "message", "content": [{"type": "input_text", "text": "hi"}]}
    assert store.pending_input([parts]) == "hi"


def _session(tmp_path: Path, rows: list[str]) -> Path:
    conn = sqlite3.connect(tmp_path / store.DB)
    conn.execute("CREATE TABLE agent_messages (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                 "session_id TEXT NOT NULL, message_data TEXT NOT NULL, created_at TIMESTAMP)")
    conn.executemany("INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
                     [(store.SESSION_ID, r) for r in rows])
    conn.commit()
    conn.close()
    return tmp_path


def test_the_database_is_read_and_damage_is_reported(tmp_path: Path) -> None:
    assert store.read_transcript(tmp_path).commits == 0  # no database yet: nothing saved
    session = _session(tmp_path, [json.dumps(i) for i in flat(WRITES[:2])] + ["{not json"])
    t = store.read_transcript(session)
    assert t.commits == 2
    assert t.integrity_error is not None
    assert "row 4" in t.integrity_error
    assert sorted(p.name for p in session.iterdir()) == [store.DB]  # read from a copy


def test_the_adapter_declares_what_it_implements() -> None:
    assert ADAPTER.name == "openai-agents"
    assert ADAPTER.capabilities == {Capability.KILL, Capability.STORE, Capability.FILE_STORE,
                                    Capability.STATE_IN_TREE}
    assert ADAPTER.python.preload == ("crashmatrix.integrations.openai_agents.warm",)
    assert ADAPTER.with_app("mypkg.agent:build").python.coverage_source == "mypkg"
    env = ADAPTER.env()
    assert env["OPENAI_AGENTS_DISABLE_TRACING"] == "1"
    assert env["OPENAI_API_KEY"].startswith("sk-crashmatrix")
