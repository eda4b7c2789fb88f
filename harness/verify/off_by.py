"""How far from its limit a run stopped: "one early", "2 late", as the limit checks say it."""

from __future__ import annotations


def off_by(reached: int, expected: int) -> str:
    """Where `reached` lies from `expected`, the count at which the limit had to be reached."""
    gap = reached - expected
    if gap == 0:
        return "exactly at the limit"
    side = "late" if gap > 0 else "early"
    return f"{'one' if abs(gap) == 1 else abs(gap)} {side}"
