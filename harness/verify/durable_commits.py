"""durable-commits: every commit the trace saw acknowledged is in the final store, same seq and label."""

from __future__ import annotations

from dataclasses import dataclass

from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.harness.records.violation import InvariantId, Violation
from crashmatrix.harness.verify.trace import Located, Trace
from crashmatrix.scenarios.model import BoundaryKind, Scenario

ID = InvariantId.DURABLE_COMMITS
K = BoundaryKind


@dataclass(frozen=True)
class Lost:
    """An acknowledged commit the final store does not hold as acknowledged."""

    ack: Located  # its commit.after
    held: str | None  # the label the store holds at that seq (None: the store ends before it)

    @property
    def seq(self) -> int:
        assert self.ack.seq is not None
        return self.ack.seq


def lost_commits(trace: Trace, t: Transcript) -> list[Lost]:
    """Every `commit.after` whose seq the final store lacks, or holds under another label.

    No fault excuses one: `kill` never removes written data, and `torn` tears only the last
    line at its `commit.written`, before that commit was acknowledged. When the adapter gives
    no labels, only the seqs are compared (the store must reach that seq).
    """
    out: list[Lost] = []
    seen: set[tuple[int, str]] = set()
    for ack in trace.of_kind(K.COMMIT_AFTER):
        seq = ack.seq
        if seq is None or (seq, ack.label) in seen:
            continue
        seen.add((seq, ack.label))
        if t.labels:
            held = t.labels.get(seq)
            if held != ack.label:
                out.append(Lost(ack, held))
        elif not 1 <= seq <= t.commits:
            out.append(Lost(ack, None))
    return out


def lost_commits_of(trace: Trace) -> list[Lost]:
    """`lost_commits` of the judged transcript, found once per judgement (intent-before-effect
    reads them too); shared, so not to be changed."""
    return trace.view(_lost)


def _lost(trace: Trace) -> list[Lost]:
    return lost_commits(trace, trace.obs.transcript)


def check_durable_commits(obs: Observation, scenario: Scenario) -> list[Violation]:
    t = obs.transcript
    out: list[Violation] = []
    for lost in lost_commits_of(Trace.of(obs)):
        now = (f"the final store holds no commit {lost.seq} (it holds {t.commits})"
               if lost.held is None else f"the final store holds commit {lost.seq} as {lost.held!r}")
        out.append(Violation(ID, (
            f"commit {lost.seq} ({lost.ack.label}) was acknowledged at {lost.ack.text}, but {now}; "
            "an acknowledged commit must never be lost or replaced"), {
            "seq": lost.seq, "label": lost.ack.label, "acknowledged": lost.ack.ref,
            "held_label": lost.held, "store_commits": t.commits}))
    return out
