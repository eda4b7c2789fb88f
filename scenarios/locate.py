"""Finds the line of a field in a scenario file's TOML text, for error messages.

tomllib gives values without positions, so this reads the text once more, just far enough to
know which table each header opens and which key each `key = value` line sets. A field inside
an inline table or array resolves to the line of the key that holds it.
"""

from __future__ import annotations

import json
import re

Path = tuple[str | int, ...]

_KEY_PART = re.compile(r"""\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')\s*""")


def _keys(text: str) -> tuple[str, ...] | None:
    """A dotted TOML key as its parts, or None when `text` is not one."""
    parts: list[str] = []
    pos = 0
    while True:
        m = _KEY_PART.match(text, pos)
        if m is None:
            return None
        bare, basic, literal = m.groups()
        if bare is not None:
            parts.append(bare)
        elif basic is not None:
            try:
                parts.append(json.loads(f'"{basic}"'))
            except ValueError:
                return None
        else:
            parts.append(literal)
        pos = m.end()
        if pos == len(text):
            return tuple(parts)
        if text[pos] != ".":
            return None
        pos += 1


def _split_assignment(line: str) -> tuple[str, str] | None:
    """`key = value` as (key, value), finding the `=` outside quoted keys."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "=":
            return line[:i], line[i + 1:]
    return None


def _depth_change(value: str) -> int:
    """How many brackets/braces `value` leaves open (strings and comments skipped)."""
    depth = 0
    quote = None
    escaped = False
    for ch in value:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == '"':
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            break
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
    return depth


def key_lines(text: str) -> dict[Path, int]:
    """The first line (1-based) that opens or sets each field path of the document."""
    found: dict[Path, int] = {}
    counts: dict[Path, int] = {}  # array-of-tables path -> index of its latest element
    table: Path = ()
    depth = 0  # open brackets of a value spanning lines
    closing = None  # the delimiter of a multi-line string being skipped

    def place(keys: tuple[str, ...]) -> Path:
        # A header's keys pass through arrays of tables at their latest element.
        path: Path = ()
        for k in keys:
            path = (*path, k)
            if path in counts:
                path = (*path, counts[path])
        return path

    def record(path: Path, n: int) -> None:
        for i in range(1, len(path) + 1):
            found.setdefault(path[:i], n)

    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if closing is not None:
            if closing in line:
                closing = None
            continue
        if depth > 0:
            depth += _depth_change(line)
            continue
        if not line or line.startswith("#"):
            continue
        if line.startswith("[["):
            keys = _keys(line[2:line.find("]]")]) if "]]" in line else None
            if keys:
                # The array itself is named by its last key; only its parents pass through
                # their latest element.
                array = (*place(keys[:-1]), keys[-1])
                counts[array] = counts.get(array, -1) + 1
                table = (*array, counts[array])
                record(table, n)
            continue
        if line.startswith("["):
            keys = _keys(line[1:line.find("]")]) if "]" in line else None
            if keys:
                table = place(keys)
                record(table, n)
            continue
        split = _split_assignment(line)
        keys = _keys(split[0]) if split else None
        if split is None or keys is None:
            continue
        record((*table, *keys), n)
        value = split[1].strip()
        for delim in ('"""', "'''"):
            if value.startswith(delim) and delim not in value[3:]:
                closing = delim
        if closing is None:
            depth = max(_depth_change(value), 0)
    return found


def line_of(text: str, path: Path) -> int | None:
    """The line of `path`, or of the nearest enclosing field the text spells out; None for the
    document itself (e.g. a missing top-level key)."""
    lines = key_lines(text)
    for end in range(len(path), 0, -1):
        if path[:end] in lines:
            return lines[path[:end]]
    return None
