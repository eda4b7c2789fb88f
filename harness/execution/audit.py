"""`--audit-states`: a case started from a crash state, checked against a real kill of it. Pure.

The states path is sound only for an agent whose recovery is a function of what it can observe.
An audited case runs both ways; any difference in what the verdict rests on (verdict, violated
invariants, recovery branches, commits, requests, exit codes, events, invariants exercised) makes the case
`nondeterministic`, with both sides in its note: the agent's recovery reads something outside
the case tree (a clock, a random number, a file elsewhere), and its states cannot be shared.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, Verdict


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


def compared(from_state: CaseResult, real: CaseResult) -> CaseResult:
    """`from_state` as it stands when a real kill agrees; else nondeterministic, saying how."""
    ours, theirs = essentials(from_state), essentials(real)
    differ = [k for k in ours if ours[k] != theirs[k]]
    if not differ:
        return from_state
    sides = "; ".join(f"{k}: from the state {ours[k]!r}, real kill {theirs[k]!r}" for k in differ)
    return dataclasses.replace(from_state, verdict=Verdict.NONDETERMINISTIC, note=(
        f"started from its crash state, the case differs from a real kill ({sides}): the agent's "
        "recovery depends on something outside the case tree, so its crash states cannot be shared; "
        "run without --states"))
