"""`--audit-states`: a case started from a crash state, checked against a real kill of it. Pure.

The states path is sound only for an agent whose recovery is a function of what it can observe,
and only while a crash state holds what a real kill leaves. An audited case runs both ways, and
any difference makes the case `nondeterministic`, with both sides in its note: in what the verdict
rests on (verdict, violated invariants, recovery branches, commits, requests, exit codes, events,
invariants exercised), or in contents, which counts miss (`Contents`: the tree at the crash, each
path's kind, mode and bytes; the workspace the case ended with). A difference in the tree at the
crash means the state did not hold what the agent left (a kind of file the snapshot dropped); a
difference after it, that the agent's recovery reads something outside the case tree (a clock, a
random number, a file elsewhere). Either way its crash states cannot be shared.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.results import CaseResult, Verdict

SHOWN = 4  # differing paths named in a note, each way


@dataclass(frozen=True)
class Contents:
    """What the audit compares of one run beyond counts. `crash_tree`: path -> kind, mode, size and
    a hash of the bytes, of the case tree at the crash point (snapshot_audit.contents; None where
    none was read: a second-process case is served by a host, not a state); `workspace`: the files
    it ended with (`workspace_of`)."""

    crash_tree: Mapping[str, str] | None  # ours: the state restored; theirs: the tree it was taken of
    workspace: Mapping[str, str]


def audited(case: Case, share: float) -> bool:
    """Whether the case is in the audited sample: `share` of them, chosen by its id (the same
    cases whatever `--jobs` and whichever order they finish in)."""
    if share <= 0:
        return False
    if share >= 1:
        return True
    digest = hashlib.sha256(case.case_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def essentials(r: CaseResult) -> dict[str, Any]:
    """What a verdict rests on, without timings."""
    return {"verdict": r.verdict.value, "invariants": r.invariants, "branches": r.branches,
            "commits": r.commits, "requests": r.requests, "exit_codes": r.exit_codes, "trace": r.trace,
            "exercised": r.exercised}


def workspace_of(obs: Observation) -> dict[str, str]:
    """The workspace the case ended with, case directory names (and case keys) masked: a shared
    recovery ran in another case's directory."""
    name = re.compile(re.escape(obs.case.scenario) + r"-[0-9a-f]{12}(?:-[0-9a-f]{16})?")
    return {path: name.sub("<case-dir>", text) for path, text in obs.workspace_after.items()}


def compared(from_state: CaseResult, real: CaseResult, ours: Contents | None = None,
             theirs: Contents | None = None) -> CaseResult:
    """`from_state` as it stands when a real kill agrees, in counts and (given) in contents;
    else nondeterministic, saying how."""
    mine, other = essentials(from_state), essentials(real)
    sides = [f"{k}: from the state {mine[k]!r}, real kill {other[k]!r}" for k in mine if mine[k] != other[k]]
    at_crash: list[str] = []
    if ours is not None and theirs is not None:
        if ours.crash_tree is not None and theirs.crash_tree is not None:
            at_crash = _paths(ours.crash_tree, theirs.crash_tree, ("restored", "as the agent left it"))
        sides += [f"final workspace {d}" for d in _paths(ours.workspace, theirs.workspace)]
    if at_crash:
        why = ("the state it started from is not the tree a real kill leaves at that point (the "
               "snapshot did not hold what the agent made there)")
        sides = [f"tree at the crash {d}" for d in at_crash] + sides
    elif sides:
        why = "the agent's recovery depends on something outside the case tree"
    else:
        return from_state
    return dataclasses.replace(from_state, verdict=Verdict.NONDETERMINISTIC, note=(
        f"started from its crash state, the case differs from a real kill ({'; '.join(sides)}): {why}, "
        "so its crash states cannot be shared; run without --states"))


def _paths(mine: Mapping[str, str], other: Mapping[str, str],
           names: tuple[str, str] = ("from the state", "real kill")) -> list[str]:
    """Each path whose entry differs, both sides shown (a few, and how many more)."""
    differ = sorted(p for p in mine.keys() | other.keys() if mine.get(p) != other.get(p))
    shown = [f"{p}: {names[0]} {_side(mine.get(p))}, {names[1]} {_side(other.get(p))}"
             for p in differ[:SHOWN]]
    return shown + ([f"and {len(differ) - SHOWN} more paths"] if len(differ) > SHOWN else [])


def _side(entry: str | None) -> str:
    if entry is None:
        return "absent"
    return repr(entry if len(entry) <= 80 else entry[:77] + "...")
