"""Final-answer templates: `{result.KEY}` and `{last_line.KEY}` placeholders over tool results.

Only these two placeholder forms are special; every other brace is literal text, so scripts
need no escaping. KEY is a result key (`bash`, `read:CHANGELOG.md`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

PLACEHOLDER = re.compile(r"\{(result|last_line)\.([^{}]*)\}")
# Anything that looks like it meant to be a placeholder, to reject typos such as `{result:bash}`.
NEAR_MISS = re.compile(r"\{(result|last_line)\b")


class Part(StrEnum):
    RESULT = "result"  # the whole content of the latest result for KEY
    LAST_LINE = "last_line"  # its last non-blank line, stripped


@dataclass(frozen=True)
class Placeholder:
    part: Part
    key: str  # unparsed result key; the schema parses it
    span: tuple[int, int]


def placeholders(text: str) -> list[Placeholder]:
    return [
        Placeholder(Part(m.group(1)), m.group(2), m.span()) for m in PLACEHOLDER.finditer(text)
    ]


def near_misses(text: str) -> int:
    """How many `{result`/`{last_line` openings are not well-formed placeholders."""
    return len(NEAR_MISS.findall(text)) - len(PLACEHOLDER.findall(text))


def last_line(content: str) -> str:
    lines = [line.strip() for line in content.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def render(text: str, lookup: Callable[[str], str | None]) -> str:
    """Fill placeholders; `lookup(key)` gives the latest result content, None when there is none."""

    def fill(m: re.Match[str]) -> str:
        content = lookup(m.group(2))
        if content is None:
            return "(no result)"
        return content if m.group(1) == Part.RESULT else last_line(content)

    return PLACEHOLDER.sub(fill, text)
