"""The LangGraph store reader: commit order and labels as the seams number them, each message at
the first commit that held it whether or not its saved write kept an id, runs, and the adapter's
arguments and preload."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.adapters.interface import LaunchSpec
from crashmatrix.integrations.langgraph import store
from crashmatrix.integrations.langgraph.adapter import ADAPTER, LangGraphAdapter

needs_langgraph = pytest.mark.skipif(
    importlib.util.find_spec("langgraph") is None and not os.environ.get("CI"),
    reason="LangGraph is not installed (pip install -e '.[langgraph]')")


def test_labels_are_case_id_tokens() -> None:
    assert store.checkpoint_label({"source": "loop"}) == "checkpoint.loop"
    assert store.checkpoint_label({}) == "checkpoint.none"
    assert store.writes_label("~__pregel_pull, tools") == "writes.tools"
    assert store.writes_label("~__pregel_pull, __start__") == "writes.start"
    assert store.writes_label("~__pregel_pull, my node+2/x") == "writes.my_node_2_x"
    assert store.writes_label("~__pregel_push, 0, agent") == "writes.task"
    assert store.writes_label("") == "writes.task"


class Thread:
    """A hand-made SqliteSaver database of one thread (the saver's own tables and encoding)."""

    def __init__(self, session: Path) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415 - the extra

        session.mkdir(parents=True, exist_ok=True)
        (session / store.THREAD_FILE).write_text("t1\n", encoding="utf-8")
        self.conn = sqlite3.connect(session / store.DB)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        self.n = 0

    def checkpoint(self, source: str, messages: list[Any]) -> str:
        self.n += 1
        cid = f"1f000000-0000-6000-8000-{self.n:012d}"  # ids sort as LangGraph's do: by time
        self.saver.put({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}},
                       {"v": 4, "id": cid, "ts": "", "channel_values": {"messages": messages},
                        "channel_versions": {}, "versions_seen": {}},  # type: ignore[typeddict-item]
                       {"source": source}, {})  # type: ignore[typeddict-item]
        self.last = cid
        return cid

    def writes(self, node: str, messages: list[Any]) -> None:
        self.n += 1
        self.saver.put_writes({"configurable": {"thread_id": "t1", "checkpoint_ns": "",
                                                "checkpoint_id": self.last}},
                              [("messages", messages)], f"task-{self.n}", f"~__pregel_pull, {node}")


@needs_langgraph
@pytest.mark.parametrize("ids_saved", [False, True])
def test_messages_sit_at_the_writes_that_first_held_them(tmp_path: Path, ids_saved: bool) -> None:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: PLC0415

    call = {"id": "call_0", "name": "append_note", "args": {"path": "C.md", "line": "x"}}
    user = HumanMessage("do it", id="u")
    asked = AIMessage("", tool_calls=[call], id="a" if ids_saved else None)
    result = ToolMessage("appended 1 line to C.md", tool_call_id="call_0", id="r" if ids_saved else None)
    t = Thread(tmp_path)
    t.checkpoint("input", [])                                     # 1
    t.writes("__start__", [{"role": "user", "content": "do it"}])  # 2
    t.checkpoint("loop", [user])                                  # 3
    t.writes("agent", [asked])                                    # 4
    # The reducer gives the message its id as it applies the write (maybe after it was saved).
    t.checkpoint("loop", [user, AIMessage("", tool_calls=[call], id="a")])  # 5
    t.writes("tools", [result])                                   # 6: killed before the next checkpoint
    transcript = store.read_transcript(tmp_path)

    assert transcript.commits == 6
    assert transcript.labels == {1: "checkpoint.input", 2: "writes.start", 3: "checkpoint.loop",
                                 4: "writes.agent", 5: "checkpoint.loop", 6: "writes.tools"}
    assert [(m.seq, m.role, m.msg_id) for m in transcript.messages] == [
        (2, "user", "m1"), (4, "assistant", "m2"), (6, "tool", "m3")]
    assistant = transcript.messages[1]
    assert assistant.content is None  # as ChatOpenAI sends it back beside tool calls
    assert assistant.wire()["tool_calls"][0]["function"]["arguments"] == json.dumps(call["args"])
    assert transcript.messages[2].call_id == "call_0"
    (run,) = transcript.runs
    assert (run.seq, run.outcome) == (1, None)  # the last message is a result: not finished


@needs_langgraph
def test_a_final_answer_completes_the_run_and_the_host_numbers_alike(tmp_path: Path) -> None:
    from langchain_core.messages import AIMessage, HumanMessage  # noqa: PLC0415

    t = Thread(tmp_path)
    t.checkpoint("input", [])
    t.writes("agent", [AIMessage("done")])
    t.checkpoint("loop", [HumanMessage("hi", id="u"), AIMessage("done", id="f")])
    transcript = store.read_transcript(tmp_path)
    (run,) = transcript.runs
    assert (run.outcome, run.finished_seq) == ("completed", 2)
    # The host continues the numbering from the database as the reader reads it.
    assert [c.label for c in store.commits(t.conn, "t1")] == list(transcript.labels.values())


def test_no_thread_no_run(tmp_path: Path) -> None:
    assert store.read_transcript(tmp_path).runs == []  # the task never reached the store


def spec(tmp_path: Path) -> LaunchSpec:
    return LaunchSpec(session=tmp_path / "s", workspace=tmp_path / "w", provider_url="http://127.0.0.1:1/v1",
                      tools=("read",), policies={}, resume_budget=3, max_retries=2, retry_delay_s=0.0,
                      provider_timeout_s=5.0, fsync=False)


def test_the_adapter_names_the_app_and_preloads_the_framework(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRASHMATRIX_LANGGRAPH_APP", raising=False)
    args = ADAPTER.start_args(spec(tmp_path), "the task")
    assert args[:2] == ["--app", "changelog_app.graph:build"]
    assert args[-5:] == ["run", str(tmp_path / "s"), str(tmp_path / "w"), "http://127.0.0.1:1/v1",
                         "the task"]
    assert ADAPTER.recover_args(spec(tmp_path))[-4] == "recover"
    assert ADAPTER.python.preload == ("crashmatrix.integrations.langgraph.warm",)
    assert ADAPTER.env()["LANGSMITH_TRACING"] == "false"
    monkeypatch.setenv("CRASHMATRIX_LANGGRAPH_APP", "mypkg.graph:build")
    mine = ["--app", "mypkg.graph:build", "--path", os.getcwd()]  # found from where crashmatrix runs
    assert ADAPTER.start_args(spec(tmp_path), "t")[:4] == mine
    assert ADAPTER.python.measured == "mypkg"
    other = ADAPTER.with_app("other.app:make")
    assert isinstance(other, LangGraphAdapter)
    assert other.start_args(spec(tmp_path), "t")[1] == "other.app:make"
