"""How much a crash state may hold (`--states`), and why one was not kept: its cases then run as real kills.

A snapshot holds the case tree in the harness's memory. Without a bound, an agent's tree is the
harness's problem: a 2 GB file at every event is a MemoryError, and an incarnation that runs on for
thousands of events (a retry loop past its limit) keeps thousands of copies of a growing log. Each
state is bounded (one file's data, all of its files' data), and so is each recording (how many
snapshots it keeps, how many bytes they hold between them, how many bytes it reads to take them),
and the matrix (what all its recordings hold at once).
A state over a bound is not kept: the crash points it stood for run as real kills, which cost what
they cost without `--states` and give the verdicts a real kill gives; the run says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """The bounds of the states of one matrix. A hole in a sparse file holds no data and counts
    for nothing; a file's data is what is read and kept of it."""

    file_bytes: int = 32 * MIB  # one file's data in one state
    tree_bytes: int = 64 * MIB  # every file's data in one state
    # One recording (the snapshots of one incarnation): a built-in scenario's incarnation emits
    # under 100 events; an agent's own loop limit ends one within about 1,500.
    states: int = 1_000
    held_bytes: int = 128 * MIB  # data its snapshots hold between them (an unchanged file counts once)
    read_bytes: int = 1 << 30  # data read to take them: every file is read at every event
    # What the matrix keeps for later cases at once: snapshots, and recoveries kept for sharing.
    # The default matrix of our agent peaks at 6 MiB; a runaway's recoveries hold 4 MiB each.
    matrix_bytes: int = 256 * MIB


LIMITS = Limits()


class Refusal(StrEnum):
    """Why a crash point's state was not kept."""

    FILE = "file-bound"  # one file holds more data than `Limits.file_bytes`
    TREE = "tree-bound"  # the state's files hold more data than `Limits.tree_bytes` together
    DEVICE = "device"  # a device node: making one needs privilege a restore cannot count on
    UNREADABLE = "unreadable"  # part of the tree could not be read (its permissions, a file gone)
    STATES = "states-cap"  # the recording already keeps `Limits.states` snapshots
    HELD = "held-cap"  # the recording's snapshots would hold more than `Limits.held_bytes`
    READ = "read-cap"  # the recording has read `Limits.read_bytes` to take its snapshots
    MATRIX = "matrix-cap"  # the matrix's recordings hold `Limits.matrix_bytes` together


class Refused(Exception):
    """A state that is not kept, and why: `reason`, and `detail` naming what was over which bound."""

    def __init__(self, reason: Refusal, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


def sized(n: int) -> str:
    """`n` bytes, readably (a bound set low in a test is kilobytes)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{n} bytes"
