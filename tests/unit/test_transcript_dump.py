"""The store-dump format: what an agent's own `dump` prints is read as the canonical transcript,
and a dump that is not the format is refused naming the field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crashmatrix.harness.records.transcript import Call
from crashmatrix.harness.records.transcript_dump import DumpError, parse_dump


def dump(**over: Any) -> str:
    base: dict[str, Any] = {
        "format": 1, "commits": 3, "labels": {"1": "message.user", "2": "message.assistant",
                                              "3": "message.tool"},
        "messages": [
            {"seq": 1, "role": "user", "content": "do it"},
            {"seq": 2, "role": "assistant", "calls": [
                {"call_id": "c1", "tool": "read", "arguments": '{"path": "x"}'}]},
            {"seq": 3, "role": "tool", "call_id": "c1", "content": "hello"}],
        "runs": [{"run_id": "run-1", "seq": 1, "outcome": "completed", "finished_seq": 3}],
    }
    return json.dumps(base | over)


def test_a_dump_is_the_transcript_it_describes() -> None:
    t = parse_dump(dump())
    assert t.commits == 3
    assert t.labels == {1: "message.user", 2: "message.assistant", 3: "message.tool"}
    assert [(m.seq, m.role, m.content) for m in t.messages] == [
        (1, "user", "do it"), (2, "assistant", None), (3, "tool", "hello")]
    assert t.messages[1].calls == (Call("c1", "read", {"path": "x"}, '{"path": "x"}'),)
    assert t.messages[2].call_id == "c1"
    assert t.messages[1].wire()["tool_calls"][0]["function"] == {"name": "read", "arguments": '{"path": "x"}'}
    assert (t.runs[0].outcome, t.runs[0].finished_seq) == ("completed", 3)
    assert t.integrity_error is None


def test_the_agent_may_say_its_store_is_unreadable() -> None:
    t = parse_dump(json.dumps({"format": 1, "commits": 0, "integrity_error": "log.jsonl: line 3 is cut"}))
    assert t.integrity_error == "log.jsonl: line 3 is cut"


@pytest.mark.parametrize(("change", "named"), [
    ({"format": 2}, "format is 2"),
    ({"messages": [{"seq": 1, "role": "robot"}]}, "$.messages[0].role"),
    ({"messages": [{"seq": 9, "role": "user", "content": "x"}]}, "`$.messages[0].seq`: commit 9"),
    ({"runs": [{"run_id": "r", "seq": 1, "colour": "red"}]}, "colour"),
    ({"commits": "3"}, "$.commits"),
])
def test_a_dump_that_is_not_the_format_is_refused_naming_the_field(change: dict[str, Any],
                                                                  named: str) -> None:
    with pytest.raises(DumpError) as caught:
        parse_dump(dump(**change))
    assert named in str(caught.value)


def test_text_that_is_not_json_is_refused() -> None:
    with pytest.raises(DumpError, match="not JSON"):
        parse_dump("Traceback (most recent call last):")
