"""liveness: the case ran to an end: no harness error, no hang, no crash exit, no run left open.

One of its findings has a name of its own: a run that can no longer complete. After the last
crash every restart failed, and the store is unreadable or still holds the run open: the crash
left a state the agent cannot get past (a session file truncated by a kill inside its write,
say), so every later restart dies the same way and the task is lost for good. `log-integrity`
says the store is damaged; this says what that costs the user.
"""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.output_tail import last_line
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Scenario

ID = InvariantId.LIVENESS
# 0: done; 1: the run ended failed or aborted, a normal verdict of the agent on its run.
NORMAL_EXITS = frozenset({0, 1})


def check_liveness(obs: Observation, scenario: Scenario) -> list[Violation]:
    out: list[Violation] = []
    if obs.harness_error is not None:
        out.append(Violation(ID, f"the harness could not finish the case: {obs.harness_error}",
                             {"harness_error": obs.harness_error}))
    for inc in obs.incarnations:
        if inc.protocol_error is not None:
            out.append(Violation(ID, (
                f"inc{inc.index} ({inc.command}) broke the probe protocol and was killed: "
                f"{inc.protocol_error}"), {"incarnation": inc.index, "protocol_error": inc.protocol_error}))
        elif inc.timed_out:
            out.append(Violation(ID, (
                f"inc{inc.index} ({inc.command}) hung: it neither reported an event nor exited "
                "before the case's deadline"), {"incarnation": inc.index, "events": len(inc.events)}))
        elif inc.must_stop and inc.exit_code == 0:
            out.append(Violation(ID, (
                f"inc{inc.index} ({inc.command}) was failed a storage call ({inc.injected}) and "
                "exited 0: it carried on as if its commit were saved; an agent must stop with an "
                "error"), {"incarnation": inc.index, "exit_code": 0, "injected": inc.injected}))
        elif inc.must_stop:
            pass  # it stopped, as it must: any error exit is its documented storage failure
        elif not inc.killed and inc.exit_code is not None and inc.exit_code not in NORMAL_EXITS:
            out.append(Violation(ID, (
                f"inc{inc.index} ({inc.command}) exited with code {inc.exit_code}; an agent that was "
                "not killed must end with 0 or 1"), {"incarnation": inc.index, "exit_code": inc.exit_code}))
    trace = Trace.of(obs)
    still_open = [r for r in obs.transcript.runs if r.outcome is None]
    stuck = _cannot_complete(obs)
    if stuck is not None:
        out.append(stuck)
    elif still_open and not trace.ended_killed and obs.transcript.integrity_error is None:
        ids = ", ".join(r.run_id for r in still_open)
        out.append(Violation(ID, (
            f"run {ids} is still open after the last incarnation ended; every run must reach an "
            "outcome"), {"open_runs": [r.run_id for r in still_open],
                         "started_seqs": [r.seq for r in still_open]}))
    return out


def _cannot_complete(obs: Observation) -> Violation | None:
    """The run can no longer complete: every restart after the last crash exited with an error
    while the store is unreadable or holds a run open (a run the agent closed, failed or
    aborted, is its verdict on the run, not a lost one)."""
    incs = obs.incarnations
    crashes = [k for k, inc in enumerate(incs) if inc.interrupted]
    if not crashes:
        return None
    crashed, restarts = incs[crashes[-1]], incs[crashes[-1] + 1:]
    if not restarts or any(inc.killed or inc.timed_out or inc.exit_code in (None, 0) for inc in restarts):
        return None
    store_error = obs.transcript.integrity_error
    still_open = [r.run_id for r in obs.transcript.runs if r.outcome is None]
    if not still_open and (store_error is None or obs.transcript.runs):
        return None  # the agent closed its run (its verdict), or nothing says it is open
    failed = ", ".join(f"inc{inc.index} ({inc.command}) exited {inc.exit_code}" for inc in restarts)
    # Why the first restart failed, in its own last words (an app that no longer loads, a
    # factory that raised): the one line a reader needs to tell a lost run from a broken start.
    said = last_line(restarts[0].output) if restarts[0].output is not None else ""
    failed += f"; inc{restarts[0].index} said: {said}" if said else ""
    state = (f"the store cannot be read ({store_error})" if store_error is not None
             else f"run {', '.join(still_open)} is still open")
    how = "was killed" if crashed.killed else f"was given a faulty storage call ({crashed.injected})"
    return Violation(ID, (
        f"the run can no longer complete: after inc{crashed.index} {how}, every restart failed "
        f"({failed}) and {state}; a crash must leave a state a restart can finish from"), {
        "cannot_complete": True, "crashed": crashed.index,
        "restarts": [{"incarnation": inc.index, "exit_code": inc.exit_code} for inc in restarts],
        "last_words": said, "store_error": store_error, "open_runs": still_open})
