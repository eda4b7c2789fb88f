"""Scenarios a matrix crashed nothing in, and why: a green run for them proves nothing. Pure."""

from __future__ import annotations

from crashmatrix.harness.records.blackbox_points import REFUSED, crash_points, refused
from crashmatrix.harness.records.results import CaseResult


def uncrashed(results: list[CaseResult]) -> dict[str, str]:
    """Scenarios whose crash-free run held but gave no crash point, so no case of theirs crashed
    anything, each with why: a green run for them would prove nothing (an agent whose probes
    never attach, a store the black-box tracer does not see, fault kinds that act nowhere in
    it). A crash-free run that failed is its own verdict, already said."""
    crashed = {r.scenario for r in results if r.depth > 0}
    out = {}
    for r in sorted(results, key=lambda r: r.scenario):
        if r.depth == 0 and r.ok and r.scenario not in crashed:
            shared = refused(r.store_calls[0]) if r.store_calls else {}
            if shared and not crash_points(r.store_calls[0]):
                files = ", ".join(f"{f} ({n} calls)" for f, n in sorted(shared.items()))
                out[r.scenario] = (f"every store call it made was on a file stored to from several "
                                   f"threads ({files}): strace counts calls per thread, so no call "
                                   "can be named that a second run would repeat (black-box refuses "
                                   "them; run with probes instead)")
            elif any(r.store_calls):
                out[r.scenario] = "none of the selected fault kinds acts at its store calls"
            elif r.store_calls or not any(r.trace):
                out[r.scenario] = ("its crash-free run reported no probe event and made no store "
                                   "call: is the agent's probe attached (CRASHMATRIX_PROBE, "
                                   "docs/your-agent.md)?")
            else:
                out[r.scenario] = "none of the selected fault kinds has a crash point in its run"
    return out


def refused_files(results: list[CaseResult]) -> dict[str, dict[str, int]]:
    """Per scenario, the files its black-box recording refused as crash points (stored to from
    several threads), each with its number of calls."""
    return {r.scenario: shared for r in sorted(results, key=lambda r: r.scenario)
            if r.depth == 0 and r.store_calls and (shared := refused(r.store_calls[0]))}


def syscall_refusals(results: list[CaseResult]) -> dict[str, list[str]]:
    """Per scenario, the session files its `--syscalls` recording refused as system-call points
    (stored to from another thread or process too), when it refused any: an agent started
    through a wrapper that forks, or writing from a thread pool, gets few or no such points, and
    no power loss at them, and the run says so rather than hold quietly."""
    out = {}
    for r in sorted(results, key=lambda r: r.scenario):
        if r.depth == 0 and r.syscall_points:
            # The recording's first incarnation and its settle (the traced ones at depth 0).
            files = sorted({e.partition(":")[2].partition(":")[2] for calls in r.syscall_points[:2]
                            for e in calls if e.startswith(REFUSED)})
            if files:
                out[r.scenario] = files
    return out
