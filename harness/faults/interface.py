"""The fault-kind contract: where a fault is enumerated, what it does at its crash point, and what it needs.

A fault kind is any object with these members, registered under the entry-point group
`crashmatrix.faults` (see `crashmatrix.harness.plugins`). At its crash point (a probe event) the
runner does what the fault's `at_crash` says, one of a closed set (`AtCrash`):

- `KILL`: SIGKILL of the incarnation's process group; `apply` then changes what the dead agent
  left behind before the next incarnation starts (`kill` does nothing more, `torn` tears the
  store's last write).
- `FREEZE`: SIGSTOP of the process group (the agent is alive, its lock held, its files open);
  `while_frozen` acts while it is stopped, through the `Frozen` the runner hands it; then the
  runner sends SIGCONT and the incarnation runs to its end. The runner SIGCONTs or SIGKILLs a
  frozen agent on every path (an error in `while_frozen`, the case deadline, an interrupt).

- `INJECT`: no probe event is its crash point: the step's `n:kind:label` is the `n`-th `kind`
  system call on the session file `label` (`03:fsync:session.jsonl`), which strace makes fail
  (`how`: `error=EIO`); the incarnation, observed, runs to its end, and `apply_observed` then
  acts on what it left (a failed sync's writes never reached the disk, a short write's prefix is
  put back where it landed). Its steps come from the recording's probe events through `steps`
  (one commit, one write and one sync of the log).

- `DOWNSTREAM`: no probe event is its crash point either: the step's `dNN:kind:service` is the
  incarnation's `NN`-th request to the scenario's downstream services (`kind` create or status),
  at which the fake downstream processes the request or not (`applies`), then resets, fails or
  holds its reply, or has the runner kill the agent before the reply reaches it (`fate`; only
  a kill ends the incarnation).

A KILL fault may also *observe* (`observes`): the runner then starts the incarnation it crashes
as a fresh process under a system-call tracer (strace), after taking an image of the session
directory, and once the incarnation is dead (and the tracer has exited) hands the fault, instead
of `apply`, an `Observed`: the calls the incarnation made to files and that image (`power`
sets the files to what a power loss would leave). An observing fault with several states at one
point (`power-subsets`: which unsynced blocks reached the disk) sets `has_variants`, acts on
the variant-less step as on one of them and `offer`s the others; each runs as a sibling case
whose step names it (`.../power-subsets:011`), so every state has an id that `repro` takes.
Observing is costly (a fresh interpreter, the tracer), so such a fault usually sets
`by_default` False: it runs when selected (`--fault`).

A KILL fault may also act at a *store call* (`at_store_calls`) in black-box mode (`--black-box`):
the agent runs without probes, a traced recording lists its calls on the session directory's
files, and strace kills it as it enters the `n`-th `kind` call on the file `label`
(`b03:fsync:session.jsonl/kill`); `apply` then acts as after any kill.

A fault kind written before a member existed is read as it behaved then: `at_crash_of` reads
a missing `at_crash` as KILL, `observes_of` a missing `observes` as False, `by_default_of` a
missing `by_default` as True.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, cast

from crashmatrix.harness.adapters.interface import Adapter, Capability, LaunchSpec
from crashmatrix.harness.records.case import CrashStep
from crashmatrix.harness.records.fs_calls import FsCall
from crashmatrix.harness.records.tree_image import TreeImage


class AtCrash(StrEnum):
    """What happens to the incarnation at the fault's crash point."""

    KILL = "kill"  # SIGKILL; `apply` then acts on what the dead agent left
    FREEZE = "freeze"  # SIGSTOP; `while_frozen` acts; SIGCONT, and it runs to its end
    INJECT = "inject"  # a system call made to fail; it runs to its end; `apply_observed` acts
    DOWNSTREAM = "downstream"  # at a downstream request: the fake downstream's `injection` acts


class Frozen(Protocol):
    """The stopped incarnation as a FREEZE fault sees it; the runner provides it."""

    @property
    def adapter(self) -> Adapter: ...

    @property
    def spec(self) -> LaunchSpec: ...

    @property
    def pid(self) -> int:
        """The stopped agent's pid (the leader of its process group)."""
        ...

    def start_second(self) -> None:
        """Start another incarnation of the agent on the same session, with the command the
        next incarnation would run (`recover`, or `run TASK` while the task is not yet in the
        store), and wait for it to end, under a deadline (a hung one is killed). The runner
        records it as an intruder, with the session directory and the workspace before and
        after it, for the verifier to judge."""
        ...


class Observed(Protocol):
    """The dead incarnation as an observing KILL fault sees it; the runner provides it."""

    @property
    def adapter(self) -> Adapter: ...

    @property
    def spec(self) -> LaunchSpec: ...

    @property
    def calls(self) -> Sequence[FsCall]:
        """Its file-system calls, in the order they returned (the tracer had exited)."""
        ...

    @property
    def before(self) -> TreeImage:
        """The session directory (`spec.session`) just before the incarnation started."""
        ...

    @property
    def fsync(self) -> bool:
        """Whether the agent was told to sync its commits (`--fsync`)."""
        ...

    def note(self, text: str) -> None:
        """Record a line with the incarnation (what the fault did, what it could not model):
        shown by `repro` and kept in the case's evidence."""
        ...

    @property
    def variant(self) -> str | None:
        """The step's variant (`power-subsets:011` gives "011"), None for a step without one."""
        ...

    def offer(self, variants: Sequence[str]) -> None:
        """A variant-less step: name the other states this crash point has (`variants`); the
        matrix runs a sibling case for each, the step with that variant."""
        ...

    def drifted(self, why: str) -> None:
        """The variant does not fit this run (it was enumerated from another): the case is
        `nondeterministic`, never judged on a state it was not meant to reach."""
        ...


class FaultKind(Protocol):
    name: str  # as written in case ids: `.../07:commit.written:run_started/torn`
    requires: frozenset[Capability]  # an adapter lacking one is never given this fault
    at_crash: AtCrash
    observes: bool  # KILL only: trace the crashed incarnation; `apply_observed` replaces `apply`
    by_default: bool  # enumerated when no `--fault` selects the kinds (else only when selected)
    at_store_calls: bool  # KILL only: also enumerated at black-box store calls (`--black-box`)

    def enumerated_at(self, kind: str, label: str) -> bool:
        """Whether the single-crash matrix crashes with this fault at a recorded event. Pure."""
        ...

    def apply(self, adapter: Adapter, spec: LaunchSpec) -> None:
        """KILL: act on the case tree once the incarnation is dead (a plain kill does nothing)."""
        ...

    def while_frozen(self, frozen: Frozen) -> None:
        """FREEZE: act while the incarnation is stopped (never called for a KILL fault)."""
        ...

    def apply_observed(self, observed: Observed) -> None:
        """An observing KILL fault: act on the case tree once the incarnation is dead, knowing
        what it did to its files (called instead of `apply`)."""
        ...


class InjectingFault(FaultKind, Protocol):
    """An INJECT fault: how strace makes its call fail, and where its steps are."""

    how: str  # strace's inject action: `error=EIO`, `error=ENOSPC`, `retval=16`
    must_stop: bool  # an error the agent must stop at (a short write it must complete instead)
    anchor: str  # the probe event kind each of its calls follows (`commit.written` for a sync)

    def steps(self, points: Sequence[str]) -> list[CrashStep]:
        """Its steps, from the recorded first incarnation's `kind:label` points. Pure."""
        ...


class ReplyFate(StrEnum):
    """What a DOWNSTREAM fault does to the reply of its request (the fake downstream's `Fate`)."""

    RESET = "reset"  # no reply: the connection is reset
    ERROR = "error"  # a 5xx reply (`status`)
    HOLD = "hold"  # no reply until the client gives up
    KILL = "kill"  # the agent is killed before the reply reaches it


class AtRequestFault(FaultKind, Protocol):
    """A DOWNSTREAM fault: what the fake downstream does at its request."""

    applies: bool  # the request is processed first (an operation applied, replayed, found)
    fate: ReplyFate
    status: int  # the reply's status for ERROR (503 or 500, say)


def at_request(fault: FaultKind) -> AtRequestFault | None:
    """The fault as a DOWNSTREAM fault, or None."""
    if at_crash_of(fault) is not AtCrash.DOWNSTREAM:
        return None
    return cast(AtRequestFault, fault)


def injecting(fault: FaultKind) -> InjectingFault | None:
    """The fault as an INJECT fault, or None."""
    if at_crash_of(fault) is not AtCrash.INJECT:
        return None
    return cast(InjectingFault, fault)


def at_crash_of(fault: FaultKind) -> AtCrash:
    """The fault's `at_crash`; KILL for a fault kind that predates the member."""
    return AtCrash(getattr(fault, "at_crash", AtCrash.KILL))


def observes_of(fault: FaultKind) -> bool:
    """The fault's `observes`; False for a fault kind that predates the member."""
    return bool(getattr(fault, "observes", False))


def at_syscall_points_of(fault: FaultKind) -> bool:
    """Whether the fault acts at a system-call point (`run --syscalls`): a kill that can land as
    the agent enters a call (`at_store_calls`), or a KILL fault that observes the calls the kill
    leaves behind (`power`: the main thread's whole trace is there, syscall_points.py)."""
    if at_crash_of(fault) is not AtCrash.KILL or injecting(fault) is not None:
        return False
    if at_request(fault) is not None:
        return False
    return bool(getattr(fault, "at_store_calls", False)) or observes_of(fault)


def at_store_calls_of(fault: FaultKind) -> bool:
    """The fault's `at_store_calls` (never for a non-KILL or observing fault); False for a fault
    kind that predates the member."""
    return (bool(getattr(fault, "at_store_calls", False)) and at_crash_of(fault) is AtCrash.KILL
            and not observes_of(fault))


def has_variants_of(fault: FaultKind) -> bool:
    """Whether the fault leaves several states at a point and names them by variant
    (`power-subsets`, its `has_variants`); False for a fault kind that predates the member."""
    return bool(getattr(fault, "has_variants", False)) and observes_of(fault)


def by_default_of(fault: FaultKind) -> bool:
    """The fault's `by_default`; True for a fault kind that predates the member."""
    return bool(getattr(fault, "by_default", True))
