"""What one case observed: incarnations and their probe traces, the store, requests, workspace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.harness.records.transcript import Transcript


@dataclass(frozen=True)
class RawOutput:
    """The end of what an incarnation printed (stdout and stderr, one file), as bytes: kept for
    every incarnation because reading it is cheap, and made readable (decoded, stripped, redacted:
    records/output_tail.py) only for a case that did not pass, since most never need it."""

    data: bytes
    skipped: int = 0  # bytes the output had before `data`, not kept (0: `data` is all of it)


@dataclass
class IncarnationRecord:
    index: int  # 1-based; 1 runs the task, later ones recover
    command: str  # run | recover
    policies: dict[str, str]  # tool -> safe|never registered in this incarnation
    events: list[ProbeEvent] = field(default_factory=list)
    crashed_at: int | None = None  # event number the harness killed it at
    exit_code: int | None = None
    timed_out: bool = False
    duration_ms: float = 0.0
    # The crash point's event differed from the recording: the case proves nothing.
    nondeterministic: str | None = None
    requests_before: int = 0  # provider requests recorded before this incarnation started
    downstream_before: int = 0  # downstream requests recorded before this incarnation started
    commits_before: int = 0  # commits in the store before this incarnation started
    # The extra `recover` after the work is done: it must find nothing to do.
    settle: bool = False
    # The probe line that broke the protocol (not JSON, no kind, too long): it was killed there,
    # and `liveness` says so (a bad line is that case's verdict, never the harness's death).
    protocol_error: str | None = None
    # Killed by the harness at this probe event, one past the step bound (`--max-events`),
    # without having ended: a runaway loop, of the agent or of the scenario's script.
    runaway: int | None = None
    # Started on the session while another incarnation of it was alive, frozen (fault `second`):
    # kept in `Observation.intrusions`, never in `incarnations`, whose order is the session's.
    intruder: bool = False
    # The probe event this incarnation was frozen at (SIGSTOP) while an intruder ran; it was
    # then resumed and ran on (it is not a crash).
    frozen_at: int | None = None
    # Run under a system-call tracer for an observing fault (`power`), and what that fault did
    # to the files it left, a line each (`session/session.jsonl: cut back to 512 of 690 bytes`).
    observed: bool = False
    fault_notes: list[str] = field(default_factory=list)
    # The other states its crash point has, as the fault offered them (`power-subsets`: a mask
    # per subset of the unsynced blocks): each a sibling case's variant (CrashStep.variant).
    variants: list[str] = field(default_factory=list)
    # The system call an injecting fault made fail in this incarnation (`fsync 3 of
    # session.jsonl: error=EIO`); it was not killed: it was to stop on its own.
    injected: str | None = None
    # The injected call was an error (EIO, ENOSPC): the incarnation must stop, exiting nonzero. A
    # short write is no error: the agent writes the rest and goes on.
    must_stop: bool = False
    # A black-box step's kill (`--black-box`): the system call it was killed entering, with no
    # probe event to number (`fsync 3 of session.jsonl`); `crashed_at` stays None.
    killed_at_call: str | None = None
    # A downstream step's fault, as done at its request (`reply-lost at downstream request 1
    # (POST /messages on mail: applied op_1)`); with `kill-after-apply` the incarnation was
    # killed there (`killed_at_request` holds the same text; `crashed_at` stays None).
    downstream_fault: str | None = None
    killed_at_request: str | None = None
    # The store calls a traced recording incarnation made (`--black-box`), `syscall:file` in the
    # order they ended, the file relative to the session directory: the black-box crash points.
    store_calls: list[str] = field(default_factory=list)
    # The end of what it printed; None when not known (an intruder, whose output its `Intrusion`
    # keeps, or a crash state's prefix incarnation, whose recorded run went on past the kill).
    output: RawOutput | None = None

    @property
    def killed(self) -> bool:
        """Killed by the schedule: at a probe event, as it entered a system call, or at a
        downstream request."""
        return (self.crashed_at is not None or self.killed_at_call is not None
                or self.killed_at_request is not None)

    @property
    def interrupted(self) -> bool:
        """Stopped by the schedule's fault: killed, or failed a storage call (after which it must
        stop on its own). What it had not saved by then, recovery owes, as after a kill."""
        return self.killed or self.injected is not None


@dataclass(frozen=True)
class Request:
    """One provider request as the fake provider saw it."""

    index: int
    messages: list[dict[str, Any]]
    status: int
    fault: str | None = None
    error_type: str | None = None  # the error body's type, when the provider refused the request
    reply: dict[str, Any] | None = None  # the assistant message the provider answered with
    rule: str | None = None  # the name of the script rule that gave the reply
    wire: str = "chat"  # the API it came on (chat, responses, anthropic: docs/wires.md)
    pairing: bool = False  # the fake refused it for breaking the API's pairing rule


@dataclass(frozen=True)
class Delivery:
    """An input or cancel the harness dropped into the inbox, and when."""

    kind: str  # input | cancel
    item_id: str
    text: str
    incarnation: int
    event_n: int


@dataclass
class Intrusion:
    """A second incarnation started on the session while incarnation `holder` was frozen.

    The snapshots are taken around the intruder, while the holder was stopped: whatever changed
    between them, the intruder changed.
    """

    holder: int  # index of the frozen incarnation
    holder_pid: int  # what a refusal should name (the agent's lock records it)
    holder_command: str  # the frozen incarnation's arguments, as a shell would quote them
    record: IncarnationRecord  # the intruder (`intruder` set); its own events, exit, timeout
    output: str  # the end of what it printed (stdout and stderr)
    requests_after: int  # provider requests recorded when it ended (`record.requests_before`: at start)
    session_before: dict[str, str] = field(default_factory=dict)
    session_after: dict[str, str] = field(default_factory=dict)
    workspace_before: dict[str, str] = field(default_factory=dict)
    workspace_after: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DownstreamRequest:
    """One request a downstream service received (fakes/downstream.py), as the verifier reads it:
    the service's own record, kept in the harness, which the agent cannot rewrite."""

    seq: int  # 1-based, in arrival order across the case's services
    service: str
    method: str
    path: str
    key: str | None  # the dedup key as sent (None: none sent, or the service dedups nothing)
    # applied | replayed | conflict | status | not_found | no_route | refused | failed
    outcome: str
    status: int | None  # None: no reply reached the agent (a fault lost or held it)
    op: str | None  # the operation applied or replayed (op_1, ...)
    incarnation: int | None = None  # which incarnation sent it, by when it arrived
    kind: str = "other"  # create | status | other
    fault: str | None = None  # the downstream fault injected at it (harness/faults/downstream.py)

    @property
    def applied(self) -> bool:
        return self.outcome == "applied"

    @property
    def point(self) -> str:
        """`kind:service`, the crash point a downstream step names (`d01:create:mail`)."""
        return f"{self.kind}:{self.service}"

    @property
    def unknown(self) -> bool:
        """Whether its outcome was unknown to the agent: no reply, or a 5xx, 408 or 429 (which
        a client cannot tell from a failure after the operation applied)."""
        return self.status is None or self.status >= 500 or self.status in (408, 429)


@dataclass
class Observation:
    case: Case
    incarnations: list[IncarnationRecord]
    transcript: Transcript
    requests: list[Request]
    workspace_before: dict[str, str]
    workspace_after: dict[str, str]
    deliveries: list[Delivery] = field(default_factory=list)
    resume_budget: int = 3
    harness_error: str | None = None
    # False when the adapter reads no store (no STORE capability): `transcript` is empty, and
    # the invariants that need it are not applicable rather than held.
    store_read: bool = True
    # Second processes started on the session while an incarnation was frozen (fault `second`).
    intrusions: list[Intrusion] = field(default_factory=list)
    # False when the adapter does not declare `concurrent`: no case of this agent starts a second
    # process, and one-writer is not applicable rather than held.
    concurrent: bool = True
    # False in black-box mode: the agent ran without probes, so no incarnation has events, and
    # the invariants judged from them are not applicable rather than held.
    probes: bool = True
    # Invariants the agent's adapter declares do not apply to it, and why (`not_applicable` of
    # the adapter: a framework that records no intent before a tool runs, say).
    declared_not_applicable: dict[str, str] = field(default_factory=dict)
    # What the scenario's downstream services received, in arrival order (docs/downstream.md).
    downstream: list[DownstreamRequest] = field(default_factory=list)
    # Set when the scratch filesystem the case ran on was low on space while it ran (its writes
    # may have failed for another case's doing): said beside a verdict that did not hold.
    scratch_low: str | None = None

    def all_events(self) -> list[tuple[int, ProbeEvent]]:
        return [(inc.index, e) for inc in self.incarnations for e in inc.events]

    def requests_of(self, incarnation: int) -> list[str]:
        """The downstream requests incarnation `incarnation` (1-based) made, as `kind:service`:
        the crash points of the downstream faults there."""
        return [r.point for r in self.downstream if r.incarnation == incarnation]
