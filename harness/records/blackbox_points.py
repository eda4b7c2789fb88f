"""A black-box recording's store calls read as crash points: which, and their ordinals. Pure.

`execution.blackbox.store_points` writes the list (`syscall:file`, in call order); two prefixes
mark calls that are no crash point: `COUNTED`, a call strace's ordinal counts (an open of a
file that does not truncate it), and `REFUSED`, a call on a file stored to from several threads,
whose n-th call is another call in another run. `--syscalls` lists (execution.syscall_points)
use `REFUSED` and a third, `SAME`: a call a kill at the probe event just before it already stands
for (no store call between).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

COUNTED = "~"
REFUSED = "!"
SAME = "="
# A file name goes into a case id, which joins steps with `+`: `+` (and `%`, to keep it
# reversible) are written %2B and %25 there, and read back when the file is named to strace.
_RESERVED = re.compile(r"[%+]")
_ESCAPED = re.compile(r"%(25|2B)")


def file_label(name: str) -> str:
    """A session file's name as a case id spells it."""
    return _RESERVED.sub(lambda m: f"%{ord(m[0]):02X}", name)


def file_of(label: str) -> str:
    """The file name a case id's label spells (`file_label` undone)."""
    return _ESCAPED.sub(lambda m: chr(int(m[1], 16)), label)


def crash_points(points: Sequence[str]) -> list[tuple[str, int]]:
    """The recording's points a case may crash at, each with its ordinal as strace counts it
    (the n-th call of that syscall on that file, counted ones included)."""
    seen: dict[str, int] = {}
    out = []
    for raw in points:
        point = raw.lstrip(COUNTED + REFUSED)
        seen[point] = seen.get(point, 0) + 1
        if raw == point:
            out.append((point, seen[point]))
    return out


def syscall_crash_points(listed: Sequence[str]) -> list[tuple[int, str, str, str | None, int]]:
    """(N, syscall, file label, the probe event before it or None, its ordinal) of each point a
    `--syscalls` incarnation listed (`N:syscall:file`, or `=kind:label@N:syscall:file`, N the
    main thread's count: execution.syscall_points); `REFUSED` entries are none. The ordinal
    counts the listed calls of that syscall on that file (which call of the file it is)."""
    out = []
    per_file: dict[str, int] = {}
    for entry in listed:
        if entry.startswith(REFUSED):
            continue
        event, point = None, entry
        if entry.startswith(SAME):
            event, _, point = entry[len(SAME):].rpartition("@")
        n, _, point = point.partition(":")
        syscall, _, label = point.partition(":")
        per_file[point] = per_file.get(point, 0) + 1
        out.append((int(n), syscall, label, event, per_file[point]))
    return out


def syscall_refused(listed: Sequence[str]) -> bool:
    """Whether the incarnation stored to a file from another thread or process too."""
    return any(entry.startswith(REFUSED) for entry in listed)


def refused(points: Sequence[str]) -> dict[str, int]:
    """Files the recording stored to from several threads, each with its number of calls."""
    out: dict[str, int] = {}
    for raw in points:
        if raw.startswith(REFUSED):
            file = raw[len(REFUSED):].partition(":")[2]
            out[file] = out.get(file, 0) + 1
    return out
