"""Parsed TOML becomes a Scenario by decoding into the model, or a ScenarioError naming the field.

The model (`model.py`) is the schema: msgspec checks types, constraints and unknown keys, and
the types' `__post_init__` checks the rest. This module only supplies the values written as
strings (boundaries, result keys, one-or-many) and turns msgspec's errors into the messages the
CLI prints: the file, the line where the text is known, the dotted field path with data keys
quoted as TOML spells them, and what was expected, derived from the type at that path.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from types import NoneType, UnionType
from typing import Any

import msgspec
from msgspec import inspect as mi

from crashmatrix.scenarios import locate
from crashmatrix.scenarios.errors import ScenarioError
from crashmatrix.scenarios.hooks import load_check
from crashmatrix.scenarios.model import (
    ENUM_NOUNS,
    Boundary,
    Dedup,
    FieldError,
    Outcomes,
    Phrases,
    ResultKey,
    Scenario,
    Statuses,
    item_type,
    unknown_value,
)

Path = tuple[str | int, ...]
BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
# msgspec's error text: "<message> - at `$.a[0].b`" or "<message> - at `key` in `$.a`".
_AT = re.compile(r"^(?P<msg>.*?)(?: - at (?P<key>`key` in )?`\$(?P<path>[^`]*)`)?$", re.S)
_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_MISSING = re.compile(r"^Object missing required field `(.+)`$")
_UNKNOWN = re.compile(r"^Object contains unknown field `(.+)`$")
_TYPE = re.compile(r"^Expected `[^`]+`, got `(\w+)`$")
_CONSTRAINT = re.compile(r"^Expected `[^`]+` (?P<rule>.+)$")
_ENUM = re.compile(r"^Invalid enum value (.+)$")
_GOT = {"int": "an integer", "float": "a float", "str": "a string", "bool": "a boolean",
        "array": "an array", "object": "a table", "null": "nothing", "datetime": "a date/time",
        "date": "a date/time", "time": "a date/time"}
ONE_OR_MANY = (Statuses, Outcomes, Phrases)


# -- values written as strings ------------------------------------------------------------------

def _item(tp: type, value: object) -> object:
    if not isinstance(value, str):
        raise FieldError(f"expected a string, got {_type_name(value)}")
    if tp is str:
        if not value.strip():
            raise FieldError("expected a non-empty string")
        return value
    try:
        return tp(value)
    except ValueError:
        raise FieldError(unknown_value(tp, value)) from None


def dec_hook(tp: type, obj: object) -> object:
    """Builds the model's values that the file writes as strings (msgspec calls it per value)."""
    if tp in (Boundary, ResultKey, Dedup):
        if not isinstance(obj, str):
            raise FieldError(f"expected a string, got {_type_name(obj)}")
        return tp.parse(obj)
    if tp in ONE_OR_MANY:
        item = item_type(tp)
        make: Any = tp
        if not isinstance(obj, list):
            return make([_item(item, obj)])
        if not obj:
            raise FieldError("expected a value or a non-empty array")
        out = []
        for i, v in enumerate(obj):
            try:
                out.append(_item(item, v))
            except FieldError as exc:
                raise FieldError(exc.message, i) from None
        return make(out)
    raise NotImplementedError(f"no decoder for {tp!r}")


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date/time"


# -- the types along a path -------------------------------------------------------------------

def _strip(tp: Any) -> Any:
    """The type a value must have: Annotated and `| None` removed."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (UnionType, typing.Union):
            rest = [a for a in typing.get_args(tp) if a is not NoneType]
            if len(rest) != 1:
                return tp
            tp = rest[0]
        else:
            return tp


def _child(tp: Any, segment: str | int, *, key: bool = False) -> Any:
    """The annotated type of `segment` inside a value of type `tp` (None when unknown)."""
    base = _strip(tp)
    if isinstance(base, type) and issubclass(base, msgspec.Struct):
        for f in msgspec.structs.fields(base):
            if f.encode_name == segment:
                return f.type
        return None
    if isinstance(base, type) and issubclass(base, ONE_OR_MANY):
        return item_type(base)
    origin = typing.get_origin(base)
    args = typing.get_args(base)
    if origin in (tuple, list) and args:
        return args[0]
    if origin in (dict, Mapping) and len(args) == 2:
        return args[0] if key else args[1]
    return None


def _fails(value: object, tp: Any) -> bool:
    try:
        msgspec.convert(value, tp, dec_hook=dec_hook)
    except (msgspec.ValidationError, FieldError):
        return True
    return False


def _resolve(data: object, raw_path: str, *, in_key: bool) -> tuple[Path, Any, object]:
    """msgspec's path (where a mapping's entry shows as `[...]`) as concrete segments, with the
    annotated type and the value found there. The entry is the first one that fails alone:
    msgspec checks entries in order and stops at the first failure."""
    tp: Any = Scenario
    value = data
    path: list[str | int] = []
    for m in _SEGMENT.finditer(raw_path):
        name, index = m.group(1), m.group(2)
        if name is not None:
            tp, value = _child(tp, name), value.get(name) if isinstance(value, dict) else None
            path.append(name)
        elif index == "...":
            value_tp = _child(tp, "", key=False)
            entries: dict[str, Any] = value if isinstance(value, dict) else {}
            bad = next((k for k, v in entries.items() if _fails(v, value_tp)), None)
            if bad is None:
                return tuple(path), None, None
            tp, value = value_tp, entries[bad]
            path.append(bad)
        else:
            tp = _child(tp, int(index))
            value = value[int(index)] if isinstance(value, list) and int(index) < len(value) else None
            path.append(int(index))
    if in_key and isinstance(value, dict):
        key_tp = _child(tp, "", key=True)
        bad = next((k for k in value if _fails(k, key_tp)), None)
        if bad is not None:
            return (*path, bad), key_tp, bad
    return tuple(path), tp, value


def _walk(data: object, path: Path) -> tuple[Any, object]:
    """The annotated type and the value at a concrete path."""
    tp: Any = Scenario
    value = data
    for seg in path:
        tp = _child(tp, seg)
        if isinstance(value, dict) and isinstance(seg, str):
            value = value.get(seg)
        elif isinstance(value, list) and isinstance(seg, int) and seg < len(value):
            value = value[seg]
        else:
            value = None
    return tp, value


# -- what was expected ------------------------------------------------------------------------

def _info(tp: Any) -> tuple[mi.Type, str | None]:
    """msgspec's view of `tp` without `| None`, and the field's description."""
    info = mi.type_info(tp)
    description = None
    while True:
        if isinstance(info, mi.Metadata):
            description = (info.extra_json_schema or {}).get("description", description)
            info = info.type
        elif isinstance(info, mi.UnionType):
            rest = [t for t in info.types if not isinstance(t, mi.NoneType)]
            if len(rest) != 1:
                return info, description
            info = rest[0]
        else:
            return info, description


def expected(tp: Any, *, constraints: bool = True) -> str:
    """What a value of type `tp` looks like, in words ("a non-empty string", "an integer >= 1")."""
    info, _ = _info(tp)
    return _words(info, constraints=constraints)


def _bounds(info: mi.IntType | mi.FloatType) -> str:
    parts = [f"{op} {v:g}" for op, v in ((">", info.gt), (">=", info.ge), ("<", info.lt),
                                          ("<=", info.le)) if v is not None]
    return f" {' and '.join(parts)}" if parts else ""


def _words(info: mi.Type, *, constraints: bool) -> str:
    if isinstance(info, mi.StrType):
        return "a non-empty string" if constraints and info.pattern == r"\S" else "a string"
    if isinstance(info, mi.IntType):
        return "an integer" + (_bounds(info) if constraints else "")
    if isinstance(info, mi.FloatType):
        return "a number" + (_bounds(info) if constraints else "")
    if isinstance(info, mi.BoolType):
        return "a boolean"
    if isinstance(info, mi.EnumType):
        if not constraints:
            return "a string"
        return "one of " + ", ".join(e.value for e in info.cls)
    if isinstance(info, mi.StructType | mi.DictType):
        return "a table"
    if isinstance(info, mi.ListType | mi.VarTupleType):
        return "a non-empty array" if constraints and info.min_length else "an array"
    if isinstance(info, mi.CustomType):
        return str(getattr(info.cls, "expected", "a value"))
    return "a value"


def _missing(tp: Any) -> str:
    if tp is None:
        return "missing required field"
    _, description = _info(tp)
    return f"missing required field; expected {expected(tp)}" + (
        f" ({description})" if description else "")


def _message(msg: str, tp: Any, value: object) -> str:
    """msgspec's own message in the loader's words, from the type at the path."""
    info = _info(tp)[0] if tp is not None else None
    if (m := _TYPE.match(msg)) and tp is not None:
        return f"expected {expected(tp, constraints=False)}, got {_GOT.get(m.group(1), m.group(1))}"
    if _ENUM.match(msg) and isinstance(info, mi.EnumType):
        return unknown_value(info.cls, value)
    if _CONSTRAINT.match(msg) and info is not None:
        if isinstance(info, mi.StrType) and info.pattern not in (None, r"\S"):
            description = _info(tp)[1]
            return f"{value!r} does not match {info.pattern}" + (
                f" ({description})" if description else "")
        if isinstance(info, mi.ListType | mi.VarTupleType):
            return f"expected at least one {_noun(info.item_type)}"
        got = f", got {value!r}" if isinstance(value, int | float) else ""
        return f"expected {_words(info, constraints=True)}{got}"
    return msg[:1].lower() + msg[1:]


def _noun(info: mi.Type) -> str:
    if isinstance(info, mi.EnumType):
        return ENUM_NOUNS.get(info.cls, "value")
    if isinstance(info, mi.StructType):
        return str(getattr(info.cls, "noun", "table"))
    return "item"


def render_field(path: Path) -> str:
    """`script[0].when.results."bash:x"`: indices in brackets, data keys quoted as TOML would."""
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        else:
            part = seg if BARE_KEY.match(seg) else '"' + seg.replace("\\", "\\\\").replace('"', '\\"') + '"'
            out += f".{part}" if out else part
    return out


def _error(exc: msgspec.ValidationError, data: dict[str, Any], source: str, text: str | None
           ) -> ScenarioError:
    m = _AT.match(str(exc))
    assert m is not None  # the pattern matches any text
    msg = m.group("msg")
    path, tp, value = _resolve(data, m.group("path") or "", in_key=bool(m.group("key")))
    cause = exc.__cause__
    if hit := _UNKNOWN.match(msg):
        message = f"unknown field; expected one of {', '.join(_file_keys(tp))}"
        path = (*path, hit.group(1))
    elif hit := _MISSING.match(msg):
        path = (*path, hit.group(1))
        message = _missing(_walk(data, path)[0])
    elif isinstance(cause, FieldError):
        # Raised by a type's own check (or the dec_hook), `at` relative to the checked value.
        path = (*path, *cause.at)
        message = _missing(_walk(data, path)[0]) if cause.missing else cause.message
    elif isinstance(cause, ValueError):
        message = str(cause)
    else:
        message = _message(msg, tp, value)
    return _located(message, path, source, text)


def _file_keys(tp: Any) -> list[str]:
    base = _strip(tp)
    keys = [f.encode_name for f in msgspec.structs.fields(base)]
    return [k for k in keys if base is not Scenario or k != "source"]


def _located(message: str, path: Path, source: str, text: str | None) -> ScenarioError:
    line = locate.line_of(text, path) if text is not None else None
    return ScenarioError(message, path=source, field=render_field(path) or None, line=line)


def parse_scenario(data: object, *, source: str, default_name: str, text: str | None = None
                   ) -> Scenario:
    """Validate one parsed TOML document. `default_name` is used when `name` is absent; `text`,
    the document's TOML text, lets errors give the line of the offending key."""
    if not isinstance(data, dict):
        raise ScenarioError(f"expected a table, got {_type_name(data)}", path=source)
    if "source" in data:
        raise _located("unknown field; expected one of " + ", ".join(_file_keys(Scenario)),
                       ("source",), source, text)
    filled = {"name": default_name, **data, "source": source}
    try:
        scenario = msgspec.convert(filled, Scenario, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        raise _error(exc, filled, source, text) from None
    if scenario.expect.check is not None:
        # Imported now, so a hook that cannot be found is an error in the file, not N cases.
        try:
            load_check(scenario.expect.check, source)
        except Exception as exc:
            raise _located(f"cannot load the check hook {scenario.expect.check!r}: "
                           f"{type(exc).__name__}: {exc}", ("expect", "check"), source, text) from None
    return scenario
