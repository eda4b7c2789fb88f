"""What a failing case's agent printed, as the reports read it from a result (`agent_output`)."""

from __future__ import annotations

from dataclasses import dataclass

from crashmatrix.harness.records.results import CaseResult


@dataclass(frozen=True)
class Tail:
    incarnation: int
    text: str  # its last lines, as recorded (capped, terminal codes out, secrets redacted)


def tails(r: CaseResult) -> list[Tail]:
    """The recorded tails of `r`, in incarnation order; none for a pass or an older record. Read
    warily: a results file may have been edited by hand, and a report must still render."""
    found: list[Tail] = []
    for item in r.agent_output or []:
        if not isinstance(item, dict):
            continue
        index, text = item.get("incarnation"), item.get("tail")
        if isinstance(index, int) and not isinstance(index, bool) and isinstance(text, str) and text:
            found.append(Tail(index, text))
    return found


def telling(r: CaseResult) -> Tail | None:
    """The one tail most likely to say what went wrong, for a report with room for one: that of
    the first incarnation that stopped on its own with a nonzero exit code (an agent that could
    not start, or gave up), else the last one that printed anything."""
    found = tails(r)
    for tail in found:
        k = tail.incarnation - 1
        crashed = r.crashed_at[k] if 0 <= k < len(r.crashed_at) else None
        code = r.exit_codes[k] if 0 <= k < len(r.exit_codes) else None
        if crashed is None and isinstance(code, int) and code != 0:
            return tail
    return found[-1] if found else None
