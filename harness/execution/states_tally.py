"""What `--states` did, per scenario: crash points started from states, the distinct states they
mapped to (and how many of those were primed), hosts for FREEZE points, and the crash points
that ran as real kills, and why."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from crashmatrix.harness.execution.snapshot_limits import Refusal


@dataclass
class Tally:
    """Per scenario: crash points run from states, and the distinct states they mapped to; FREEZE
    points served by hosts, and the hosts run for them."""

    points: Counter[str] = field(default_factory=Counter)
    distinct: Counter[str] = field(default_factory=Counter)
    frozen: Counter[str] = field(default_factory=Counter)
    hosts: Counter[str] = field(default_factory=Counter)
    # Of the distinct states, those whose recovery was primed: started while the recording ran.
    primed: Counter[str] = field(default_factory=Counter)
    # Crash points run as real kills because their state was not kept, by scenario and why, and
    # the first such state's detail (what was over which bound).
    unkept: Counter[tuple[str, Refusal]] = field(default_factory=Counter)
    unkept_detail: dict[tuple[str, Refusal], str] = field(default_factory=dict)
    # Recoveries not kept, the matrix's budget spent: for sharing (a later case with their state
    # runs its own), nor for their children (which run as real kills).
    unshared: Counter[str] = field(default_factory=Counter)

    def unkept_lines(self) -> list[str]:
        """One line per scenario and reason: how many crash points ran as real kills, and why."""
        return [f"{scenario}: {n} crash point{'' if n == 1 else 's'} ran as real kills, their states "
                f"not kept ({reason.value}: {self.unkept_detail[scenario, reason]})"
                for (scenario, reason), n in sorted(self.unkept.items())] + [
            f"{scenario}: {n} recover{'y' if n == 1 else 'ies'} not kept for later cases "
            f"({Refusal.MATRIX.value}: the matrix's snapshots and recoveries held what they may)"
            for scenario, n in sorted(self.unshared.items())]
