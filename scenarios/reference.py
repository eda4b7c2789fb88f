"""The field tables of docs/scenarios.md, rendered from the model so the reference cannot drift."""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import inspect as mi

from crashmatrix.scenarios.model import (
    ENUM_NOUNS,
    AgentSettings,
    CallSpec,
    Cancel,
    Condition,
    Expect,
    Fault,
    Input,
    LineRule,
    MatrixSettings,
    ProviderSettings,
    Reply,
    Rule,
    Scenario,
    Tools,
)

# Where each table sits in the file, in the order the docs present them.
TABLES: tuple[tuple[str, type[msgspec.Struct]], ...] = (
    ("top level", Scenario), ("[tools]", Tools), ("[agent]", AgentSettings),
    ("[provider]", ProviderSettings), ("[matrix]", MatrixSettings), ("[[script]]", Rule),
    ("reply", Reply), ("reply.tool_calls[i]", CallSpec), ("when (a condition)", Condition),
    ("[[faults]]", Fault), ("[[inputs]]", Input), ("[[cancels]]", Cancel), ("[expect]", Expect),
    ("[[expect.lines]]", LineRule),
)
# Defaults that depend on where the value sits, which a static default cannot say.
CONTEXT_DEFAULTS = {
    (Scenario, "name"): "the file's stem",
    (Rule, "name"): '`"script[i]"`',
    (Rule, "reply"): "required",
    (Fault, "hold_s"): "provider_timeout_s + 1, at most 60",
}


def _bounds(info: mi.IntType | mi.FloatType) -> str:
    parts = [f"{op} {v:g}" for op, v in ((">", info.gt), ("≥", info.ge), ("<", info.lt), ("≤", info.le))
             if v is not None]
    return f" {', '.join(parts)}" if parts else ""


def type_words(info: mi.Type) -> str:
    """A field's type as the reference writes it."""
    if isinstance(info, mi.Metadata):
        return type_words(info.type)
    if isinstance(info, mi.UnionType):
        return " or ".join(type_words(t) for t in info.types if not isinstance(t, mi.NoneType))
    if isinstance(info, mi.StrType):
        if info.pattern == r"\S":
            return "non-blank string"
        return f"string matching `{info.pattern}`" if info.pattern else "string"
    if isinstance(info, mi.IntType):
        return "integer" + _bounds(info)
    if isinstance(info, mi.FloatType):
        return "number" + _bounds(info)
    if isinstance(info, mi.EnumType):
        return " \\| ".join(f'`"{e.value}"`' for e in info.cls)
    if isinstance(info, mi.StructType):
        return "table"
    if isinstance(info, mi.DictType):
        key = info.key_type
        key_words = ENUM_NOUNS.get(key.cls, "key") if isinstance(key, mi.EnumType) else (
            "result key" if isinstance(key, mi.CustomType) else "string")
        return f"table {key_words} → {type_words(info.value_type)}"
    if isinstance(info, mi.ListType | mi.VarTupleType):
        item = info.item_type
        of = "tables" if isinstance(item, mi.StructType) else (
            f"{ENUM_NOUNS.get(item.cls, 'value')}s" if isinstance(item, mi.EnumType) else type_words(item))
        return f"{'non-empty ' if info.min_length else ''}array of {of}"
    if isinstance(info, mi.CustomType) and hasattr(info.cls, "expected"):
        return str(info.cls.expected)
    if isinstance(info, mi.CustomType):
        doc = (info.cls.__doc__ or "").strip().splitlines()[0].rstrip(".")
        return doc[:1].lower() + doc[1:]
    return "value"


def _default(cls: type[msgspec.Struct], f: msgspec.structs.FieldInfo) -> str:
    if (cls, f.encode_name) in CONTEXT_DEFAULTS:
        return CONTEXT_DEFAULTS[cls, f.encode_name]
    if f.default is msgspec.NODEFAULT and f.default_factory is msgspec.NODEFAULT:
        return "required"
    value: Any = f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
    if value is None:
        return "none"
    if isinstance(value, msgspec.Struct):
        return "all defaults"
    return f"`{msgspec.json.encode(value).decode()}`"


def table(cls: type[msgspec.Struct]) -> str:
    """One markdown table: field, type, default, meaning."""
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    by_name = {f.name: f for f in msgspec.structs.fields(cls)}
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for f in info.fields:
        if cls is Scenario and f.encode_name == "source":
            continue
        meaning = (f.type.extra_json_schema or {}).get("description", "") if isinstance(
            f.type, mi.Metadata) else ""
        rows.append(f"| `{f.encode_name}` | {type_words(f.type)} | "
                    f"{_default(cls, by_name[f.name])} | {meaning.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)


def reference() -> str:
    """Every table of the format, headed by where it sits in the file."""
    return "\n\n".join(f"### `{where}`\n\n{table(cls)}" for where, cls in TABLES)


if __name__ == "__main__":  # regenerate: python -m crashmatrix.scenarios.reference
    print(reference())
