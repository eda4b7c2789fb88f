"""log-integrity: the store reads cleanly and its runs open and close by the commit rules."""

from __future__ import annotations

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.violation import InvariantId, Violation, short
from crashmatrix.harness.verify.trace import Trace
from crashmatrix.scenarios.model import Scenario

ID = InvariantId.LOG_INTEGRITY


def check_log_integrity(obs: Observation, scenario: Scenario) -> list[Violation]:
    t = obs.transcript
    trace = Trace.of(obs)
    out: list[Violation] = []
    if t.integrity_error is not None:
        # The reader reports unreadable damage, a run finished twice and a run_finished for an
        # unknown run here: the canonical transcript keeps only one finish per run.
        out.append(Violation(ID, f"the session store is not intact: {t.integrity_error}",
                             {"integrity_error": t.integrity_error}))
    if t.torn_tail is not None and not trace.ended_killed:
        # The last incarnation finished normally, so its open should have repaired the tail.
        last = trace.last
        out.append(Violation(
            ID, f"the store ends in a torn commit ({t.torn_tail}) although the last incarnation "
            f"(inc{last.index if last else '?'}) was not killed; opening must repair a torn tail",
            {"torn_tail": t.torn_tail, "incarnation": last.index if last else None}))
    runs = {r.run_id: r for r in t.runs}
    for m in t.messages:
        run = runs.get(m.run_id)
        if run is None:
            out.append(Violation(
                ID, f"message {m.msg_id} ({m.role}) at commit {m.seq} belongs to run {m.run_id}, "
                "which was never started", {"message": m.msg_id, "seq": m.seq, "run": m.run_id}))
        elif run.finished_seq is not None and m.seq > run.finished_seq:
            out.append(Violation(
                ID, f"message {m.msg_id} ({m.role}: {short(m.content, 40)!r}) was committed at "
                f"commit {m.seq} to run {m.run_id}, which had finished ({run.outcome}) at commit "
                f"{run.finished_seq}",
                {"message": m.msg_id, "seq": m.seq, "run": m.run_id, "finished_seq": run.finished_seq}))
    open_runs = [r for r in t.runs if r.outcome is None]
    if len(open_runs) > 1:
        ids = [r.run_id for r in open_runs]
        out.append(Violation(
            ID, f"{len(open_runs)} runs are open at the end ({', '.join(ids)}); at most one run may "
            "be open at a time", {"open_runs": ids, "started_seqs": [r.seq for r in open_runs]}))
    return out
