"""A workspace file's before/after line diff, with the lines a repeated effect doubled marked `dup`."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from crashmatrix.reports.html_base import e


@dataclass(frozen=True)
class DiffLine:
    op: str  # "eq" | "add" | "del"
    text: str
    before_n: int | None  # line number in the before text
    after_n: int | None  # line number in the after text
    dup: int = 0  # times the line is in the after text, when a repeated effect doubled it


def duplicated(before: str, after: str) -> dict[str, int]:
    """Lines the after text holds at least twice and more often than the before text did: what an
    effect that ran twice (an append re-run after a crash) leaves. Blank lines are left out: a
    file gains several of those honestly."""
    was, now = Counter(before.splitlines()), Counter(after.splitlines())
    return {line: n for line, n in now.items() if line.strip() and n >= 2 and n > was[line]}


def diff_lines(before: str | None, after: str | None) -> list[DiffLine]:
    a, b = (before or "").splitlines(), (after or "").splitlines()
    dups = duplicated(before or "", after or "")
    out: list[DiffLine] = []
    # autojunk off: a file of many equal lines (a witness file of "ran") must diff line by line.
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out += [DiffLine("eq", b[j1 + k], i1 + k + 1, j1 + k + 1, dups.get(b[j1 + k], 0))
                    for k in range(i2 - i1)]
            continue
        out += [DiffLine("del", a[i], i + 1, None) for i in range(i1, i2)]
        out += [DiffLine("add", b[j], None, j + 1, dups.get(b[j], 0)) for j in range(j1, j2)]
    return out


SIGN = {"eq": " ", "add": "+", "del": "-"}


def render_file(path: str, before: object, after: object,
                truncated: Mapping[str, object] | None = None) -> list[str]:
    """A file's diff as lines of a <pre>: each line a span whose class is its op (and `dup`).
    `truncated`: characters the record cut from the end of the text `before` or `after`, said
    in a note above the diff (as a line it would read as one the file had)."""
    state = "created" if before is None else "removed" if after is None else "changed"
    lines = diff_lines(None if before is None else str(before), None if after is None else str(after))
    dups = sum(1 for d in lines if d.dup)
    note = f' — <span class="dup-mark">⚠ {dups} line(s) duplicated</span>' if dups else ""
    cut = "".join(f'<p class="cut">{side}: the record keeps the first part of this file only, '
                  f"{e(n)} more character(s) not recorded; the diff ends there.</p>"
                  for side, n in sorted((truncated or {}).items()) if side in ("before", "after"))
    out = [f'<div class="file" data-path="{e(path)}"><p class="file-head"><code>{e(path)}</code> '
           f"({state}){note}</p>{cut}<pre class=\"diff\">"]
    rows = []
    for d in lines:
        cls = f"d-{d.op}" + (" dup" if d.dup else "")
        num = d.after_n if d.after_n is not None else d.before_n
        mark = (f' <span class="dup-mark" title="this line is in the file {d.dup} times">⚠ ×{d.dup}</span>'
                if d.dup else "")
        rows.append(f'<span class="{cls}"><span class="ln">{num:>4}</span> {SIGN[d.op]} '
                    f"{e(d.text)}{mark}</span>")
    # Each line is a block (styled so): no newline between them, or a <pre> would show two.
    out.append("".join(rows) + "</pre></div>")
    return out
