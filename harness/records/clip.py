"""Cutting long text and long lists, one rule each, for the records and every report."""

from __future__ import annotations

from collections.abc import Iterable


def clip(text: object, limit: int, *, keep_end: bool = False) -> str:
    """`text` cut to `limit` characters, saying how many more there were (a reader must see that
    something is missing, and how much). `keep_end`: keep its last characters instead (the end of
    a process's output says why it ended)."""
    s = str(text)
    if len(s) <= limit:
        return s
    if keep_end:
        return f"[{len(s) - limit} characters before] …" + s[len(s) - limit:]
    return s[:limit] + f"… [{len(s) - limit} more characters]"


def head_tail(count: int, head: int, tail: int, keep: Iterable[int | None] = ()) -> list[int]:
    """The indexes (0-based) a capped list of `count` items shows: all of a short one; of a long
    one its first `head`, its last `tail`, and each index of `keep` (a crash or freeze point)."""
    if count <= head + tail:
        return list(range(count))
    chosen = set(range(head)) | set(range(count - tail, count))
    chosen.update(k for k in keep if k is not None and 0 <= k < count)
    return sorted(chosen)
