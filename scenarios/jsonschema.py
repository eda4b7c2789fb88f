"""The scenario file format as a JSON Schema (draft 2020-12), derived from the model, for editors."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Any

import msgspec

from crashmatrix.scenarios.model import (
    Boundary,
    Dedup,
    Outcomes,
    Phrases,
    ResultKey,
    Rule,
    Scenario,
    Statuses,
    item_type,
)

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _one_or_many(item: dict[str, Any], description: str) -> dict[str, Any]:
    return {"anyOf": [item, {"type": "array", "items": item, "minItems": 1}],
            "description": description}


def _enum(cls: Any) -> dict[str, Any]:
    return {"enum": [e.value for e in cls]}


def _hook(tp: type) -> dict[str, Any]:
    """Schemas of the values the file writes as strings (the loader's dec_hook builds them)."""
    if tp in (Boundary, ResultKey, Dedup):
        return {**tp.json_schema, "description": tp.expected}
    if tp in (Statuses, Outcomes):
        return _one_or_many(_enum(item_type(tp)), tp.__doc__ or "")
    if tp is Phrases:
        return _one_or_many({"type": "string", "pattern": r"\S"}, tp.__doc__ or "")
    raise NotImplementedError(f"no JSON Schema for {tp!r}")


def _drop_null(node: Any) -> Any:
    """TOML has no null: `X | None` fields are just optional keys, so `null` branches go."""
    if isinstance(node, list):
        return [_drop_null(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _drop_null(v) for k, v in node.items()}
    branches = out.get("anyOf")
    if isinstance(branches, list):
        kept = [b for b in branches if b != {"type": "null"}]
        if len(kept) == 1:
            del out["anyOf"]
            out = {**kept[0], **out}
        else:
            out["anyOf"] = kept
    if out.get("default", 0) is None:
        del out["default"]
    elif isinstance(out.get("default"), dict):
        out["default"] = {k: v for k, v in out["default"].items() if v is not None}
    return out


def _key_names(defs: dict[str, Any]) -> None:
    """msgspec leaves out the schema of a mapping's keys when they are custom types; a result
    key table (`results = { "read:CHANGELOG.md" = "ok" }`) is still checked key by key."""
    for struct in (msgspec.inspect.type_info(t) for t in _structs(Scenario)):
        assert isinstance(struct, msgspec.inspect.StructType)
        props = defs[struct.cls.__name__]["properties"]
        for f in struct.fields:
            info = f.type.type if isinstance(f.type, msgspec.inspect.Metadata) else f.type
            if isinstance(info, msgspec.inspect.DictType) and isinstance(
                    info.key_type, msgspec.inspect.CustomType):
                key_schema = _hook(info.key_type.cls)
                props[f.encode_name]["propertyNames"] = {"pattern": key_schema["pattern"]}


def _structs(tp: Any, seen: set[type] | None = None) -> list[type]:
    """Every Struct type reachable from `tp`."""
    seen = set() if seen is None else seen
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        if tp in seen:
            return []
        seen.add(tp)
        found = [tp]
        for f in msgspec.structs.fields(tp):
            found += _structs(f.type, seen)
        return found
    return [t for arg in typing.get_args(tp) for t in _structs(arg, seen)]


def scenario_json_schema() -> dict[str, Any]:
    """The JSON Schema of a scenario file: every table closed to unknown keys, descriptions
    from the model. Built afresh on each call, so callers may change the result."""
    generated = msgspec.json.schema(Scenario, schema_hook=_hook)
    defs: dict[str, Any] = generated["$defs"]
    _key_names(defs)
    root = defs.pop("Scenario")
    # Keys the loader fills in are not the file's to require (and `source` not the file's at all).
    root["properties"] = {k: v for k, v in root["properties"].items() if k != "source"}
    root["required"] = [k for k in root["required"] if k not in Scenario.loader_keys]
    rule = defs["Rule"]
    # The Struct's placeholder default stands for "missing": the file must give these keys.
    rule["required"] = sorted({*rule.get("required", []), *Rule.required_keys})
    for key in Rule.required_keys:
        rule["properties"][key].pop("default", None)
    # An unnamed rule is named after its place ("script[2]"), which no static default can say.
    rule["properties"]["name"].pop("default", None)
    schema: Mapping[str, Any] = {
        "$schema": DRAFT,
        **root,
        "title": "crashmatrix scenario",
        "description": "A crashmatrix scenario file (TOML); see docs/scenarios.md.",
        "$defs": defs,
    }
    return dict(_drop_null(dict(schema)))
