"""The scenario JSON Schema: it accepts every built-in, closes every table, and agrees with the loader."""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from crashmatrix.scenarios import ScenarioError, builtin_dir
from crashmatrix.scenarios.jsonschema import scenario_json_schema
from crashmatrix.scenarios.schema import parse_scenario

BUILTINS = sorted(builtin_dir().glob("*.toml"))
# Scenarios for tools of a user's own (any name, JSON arguments, records and patterns oracles).
EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*/scenarios/*.toml"))
Data = dict[str, Any]


def validator() -> jsonschema.Draft202012Validator:
    schema = scenario_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def changelog() -> Data:
    return tomllib.loads((builtin_dir() / "changelog.toml").read_text(encoding="utf-8"))


def test_the_schema_is_a_draft_2020_12_schema_with_descriptions() -> None:
    schema = scenario_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"]
    assert schema["properties"]["task"]["description"] == "the prompt the first incarnation runs"
    assert "source" not in schema["properties"], "the loader sets source; a file may not"
    assert set(schema["required"]) == {"task", "script"}
    assert scenario_json_schema() is not schema, "a fresh dict per call"


def test_every_table_is_closed_to_unknown_keys() -> None:
    schema = scenario_json_schema()
    tables = [schema, *(d for d in schema["$defs"].values() if d.get("type") == "object")]
    assert len(tables) >= 14
    for table in tables:
        assert table["additionalProperties"] is False, table.get("title")


@pytest.mark.parametrize("path", BUILTINS + EXAMPLES, ids=lambda p: p.stem)
def test_every_builtin_and_example_validates(path: Path) -> None:
    validator().validate(tomllib.loads(path.read_text(encoding="utf-8")))


def _set(*keys: str | int, value: Any) -> Callable[[Data], None]:
    def change(data: Data) -> None:
        node: Any = data
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    return change


def _drop(*keys: str | int) -> Callable[[Data], None]:
    def change(data: Data) -> None:
        node: Any = data
        for k in keys[:-1]:
            node = node[k]
        del node[keys[-1]]
    return change


# (what, change): each turns the valid `changelog` built-in into a file both must refuse.
REFUSED = [
    ("typo'd top-level key", _set("taks", value="do it")),
    ("typo'd key in [[script]]", _set("script", 0, "wen", value={})),
    ("typo'd key in [agent]", _set("agent", value={"resume_budgt": 1})),
    ("typo'd key in a condition", _set("script", 0, "when", value={"turn": 0})),
    ("typo'd key in a tool call", _set("script", 0, "reply", "tool_calls", 0, "argz", value={})),
    ("typo'd key in [[expect.lines]]", _set("expect", "lines", 0, "cont", value=1)),
    ("wrong type: task", _set("task", value=3)),
    ("wrong type: resume_budget", _set("agent", value={"resume_budget": "3"})),
    ("negative max_retries", _set("agent", value={"max_retries": -1})),
    ("zero provider timeout", _set("agent", value={"provider_timeout_s": 0})),
    ("not a tool name", _set("tools", "enabled", value=["read", "rm -rf"])),
    ("unknown policy", _set("tools", "policies", value={"read": "maybe"})),
    ("record field of a non-scalar value", _set("expect", "records", value=[
        {"path": "o.jsonl", "where": {"to": ["a"]}, "count": 1}])),
    ("record rule with an unknown key", _set("expect", "records", value=[
        {"path": "o.jsonl", "wher": {}, "count": 1}])),
    ("pattern rule without a pattern", _set("expect", "patterns", value=[{"path": "o", "count": 1}])),
    ("check hook that is not module:function", _set("expect", "check", value="just-a-name")),
    ("no tools", _set("tools", "enabled", value=[])),
    ("unknown status", _set("script", 1, "when", value={"last_turn": {"bash": "fine"}})),
    ("empty status array", _set("script", 1, "when", value={"last_turn": {"bash": []}})),
    ("malformed result key tool", _set("script", 1, "when", value={"results": {"rm -rf": "ok"}})),
    ("bad boundary", _set("inputs", value=[{"id": "i", "text": "t", "at": "effect.later"}])),
    ("bad id", _set("cancels", value=[{"id": "-x", "at": "effect.after"}])),
    ("bad name", _set("name", value="Not Valid")),
    ("blank task", _set("task", value="  ")),
    ("missing task", _drop("task")),
    ("missing script", _drop("script")),
    ("empty script", _set("script", value=[])),
    ("rule without reply", _drop("script", 0, "reply")),
    ("empty tool_calls", _set("script", 0, "reply", "tool_calls", value=[])),
    ("unknown outcome", _set("expect", "outcome", value="done")),
    ("hold_s too long", _set("faults", value=[{"kind": "timeout", "hold_s": 61}])),
    ("crash_loop zero", _set("matrix", value={"crash_loop": 0})),
    ("unknown call id scheme", _set("provider", value={"call_ids": "random"})),
    ("loader-only key", _set("source", value="elsewhere.toml")),
]
# Changes the loader accepts: the schema must accept them too.
ACCEPTED = [
    ("a valid name", _set("name", value="my_changelog-2")),
    ("one outcome as an array", _set("expect", "outcome", value=["completed", "failed"])),
    ("status as an array", _set("script", 1, "when", value={"last_turn": {"bash": ["ok"]}})),
    ("a timeout fault with hold_s", _set("faults", value=[{"kind": "timeout", "hold_s": 0.5}])),
    ("integer seconds", _set("agent", value={"retry_delay_s": 1})),
    ("a cancel", _set("cancels", value=[{"id": "c.1", "at": "effect.after:append_note"}])),
]


def _loader_refuses(data: Data) -> bool:
    try:
        parse_scenario(data, source="mutated.toml", default_name="mutated")
    except ScenarioError:
        return True
    return False


@pytest.mark.parametrize(("what", "change"), REFUSED + ACCEPTED, ids=[w for w, _ in REFUSED + ACCEPTED])
def test_the_schema_and_the_loader_agree(what: str, change: Callable[[Data], None]) -> None:
    data = copy.deepcopy(changelog())
    change(data)
    schema_refuses = not validator().is_valid(data)
    assert schema_refuses == _loader_refuses(data), what
    assert schema_refuses == (what in dict(REFUSED)), what


def test_the_unmutated_file_passes_both() -> None:
    data = changelog()
    assert validator().is_valid(data)
    assert not _loader_refuses(data)


def test_a_typo_is_reported_at_the_typo() -> None:
    data = changelog()
    data["agent"] = {"resume_budgt": 1}
    (error,) = validator().iter_errors(data)
    assert list(error.absolute_path) == ["agent"]
    assert "resume_budgt" in error.message
