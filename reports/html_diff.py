"""A workspace file's before/after line diff, with the lines a repeated effect doubled marked `dup`."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crashmatrix.reports.html_base import e


@dataclass(frozen=True)
class DiffLine:
    op: str  # "eq" | "add" | "del"
    text: str
    before_n: int | None  # line number in the before text
    after_n: int | None  # line number in the after text
    dup: int = 0  # times the line is in the after text, when a repeated effect doubled it
    record: bool = False  # `dup` counts records the verifier matched, not equal lines


def duplicated(before: str, after: str) -> dict[str, int]:
    """Lines the after text holds at least twice and more often than the before text did: what an
    effect that ran twice (an append re-run after a crash) leaves. Blank lines are left out: a
    file gains several of those honestly."""
    was, now = Counter(before.splitlines()), Counter(after.splitlines())
    return {line: n for line, n in now.items() if line.strip() and n >= 2 and n > was[line]}


def repeated_records(violations: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, ...]]:
    """Per file, the after-lines a violation counted as one effect's records, more of them than
    allowed: the records an email sent twice left. They differ in fields the oracle ignores (a
    timestamp, a message id), so `duplicated`, which compares whole lines, cannot see them; the
    verifier already matched them by the fields that matter, and its evidence names the lines."""
    out: dict[str, set[int]] = {}
    for v in violations:
        ev = v.get("evidence")
        if not isinstance(ev, Mapping) or not isinstance(ev.get("path"), str):
            continue
        lines = [n for n in ev.get("file_lines") or () if isinstance(n, int)]
        high = ev.get("max")
        over = isinstance(high, int) and len(lines) > high
        too_many = v.get("invariant") == "at-most-once" or (v.get("invariant") == "scenario-oracle" and over)
        if too_many and len(lines) >= 2:
            out.setdefault(ev["path"], set()).update(lines)
    return {path: tuple(sorted(lines)) for path, lines in out.items()}


def diff_lines(before: str | None, after: str | None, repeated: Sequence[int] = ()) -> list[DiffLine]:
    """`repeated`: after-line numbers of records one effect left more than once (`repeated_records`),
    marked as doubled though their text differs."""
    a, b = (before or "").splitlines(), (after or "").splitlines()
    dups = duplicated(before or "", after or "")
    out: list[DiffLine] = []

    def line(op: str, text: str, before_n: int | None, after_n: int) -> DiffLine:
        if dups.get(text, 0):
            return DiffLine(op, text, before_n, after_n, dups[text])
        if after_n in repeated:
            return DiffLine(op, text, before_n, after_n, len(repeated), record=True)
        return DiffLine(op, text, before_n, after_n)

    # autojunk off: a file of many equal lines (a witness file of "ran") must diff line by line.
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            out += [line("eq", b[j1 + k], i1 + k + 1, j1 + k + 1) for k in range(i2 - i1)]
            continue
        out += [DiffLine("del", a[i], i + 1, None) for i in range(i1, i2)]
        out += [line("add", b[j], None, j + 1) for j in range(j1, j2)]
    return out


SIGN = {"eq": " ", "add": "+", "del": "-"}


def render_file(path: str, before: object, after: object,
                truncated: Mapping[str, object] | None = None, repeated: Sequence[int] = ()) -> list[str]:
    """A file's diff as lines of a <pre>: each line a span whose class is its op (and `dup`).
    `truncated`: characters the record cut from the end of the text `before` or `after`, said
    in a note above the diff (as a line it would read as one the file had). `repeated`: the
    lines of records one effect left more than once (`repeated_records`)."""
    state = "created" if before is None else "removed" if after is None else "changed"
    lines = diff_lines(None if before is None else str(before), None if after is None else str(after),
                       repeated)
    dups = sum(1 for d in lines if d.dup)
    note = f' — <span class="dup-mark">⚠ {dups} line(s) duplicated</span>' if dups else ""
    if any(d.record for d in lines):
        note += (' <span class="dup-note">(records matched by the fields the scenario counts, '
                 "whatever their other fields, such as a timestamp)</span>")
    cut = "".join(f'<p class="cut">{side}: the record keeps the first part of this file only, '
                  f"{e(n)} more character(s) not recorded; the diff ends there.</p>"
                  for side, n in sorted((truncated or {}).items()) if side in ("before", "after"))
    out = [f'<div class="file" data-path="{e(path)}"><p class="file-head"><code>{e(path)}</code> '
           f"({state}){note}</p>{cut}<pre class=\"diff\">"]
    rows = []
    for d in lines:
        cls = f"d-{d.op}" + (" dup" if d.dup else "")
        num = d.after_n if d.after_n is not None else d.before_n
        what = ("one effect's record, matched by the fields the scenario counts, is in the file"
                if d.record else "this line is in the file")
        mark = (f' <span class="dup-mark" title="{what} {d.dup} times">⚠ ×{d.dup}</span>'
                if d.dup else "")
        rows.append(f'<span class="{cls}"><span class="ln">{num:>4}</span> {SIGN[d.op]} '
                    f"{e(d.text)}{mark}</span>")
    # Each line is a block (styled so): no newline between them, or a <pre> would show two.
    out.append("".join(rows) + "</pre></div>")
    return out
