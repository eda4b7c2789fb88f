"""`--states`: cases started from recorded crash states, and one recovery per distinct state.

A case that kills (or tears) incarnation d at event n normally runs incarnations 1..d again up to
that event. Here its parent's run (the recording, for d = 1) took a snapshot of the case tree and
the fake provider's state at every event of incarnation d (`states.take`); the case restores the
one at event n into its own directory, applies its fault there, and starts with `recover`. Its
earlier incarnations are its parent's, the last one cut at event n and marked killed there: the
same records a real kill leaves, since the agent was waiting at that event when the snapshot was
taken.

Many crash points leave the same bytes (nothing touches the disk between one commit's
`commit.after` and the next `commit.before`). The restored state is hashed (`states.tree_key`,
without the fake's request log: `states.unlogged`): cases
with the same key share one recovery (and settle), run by the first to get there; each case is
still judged on its own observation (its own prefix, the shared recovery). Sound only for an agent
whose recovery is a function of what it can observe (`Capability.STATE_IN_TREE`); `--audit-states`
re-runs a sample of shared cases as real kills and reports any difference.

Used for a step whose fault is a plain KILL fault (`kill`, `torn`), and for a FREEZE fault
(`second`) through one host per parent incarnation (freeze_chain.py); anything else (a power loss,
an injected error, a black-box step), or a parent run without snapshots runs as a real kill. A
scenario's inputs and cancels delivered at events are part of the state: the snapshot at an event
is taken after that event's delivery (a kill there comes after it too), the items delivered by
then are in the key, and the recovery is given the rest at their events.

Snapshots are bounded (snapshot_limits.py): a state over a bound, or past its recording's or the
matrix's caps, is not kept, and its crash points run as real kills (`Tally.unkept_lines` says why).

A recording offers the cases at each event as soon as its snapshot there is kept (priming.py): in
a job no case holds, the shared recovery of such a case's state starts before the recording ends
(`_prime`), and the case, enumerated from the finished trace as always, finds it owned.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from crashmatrix.fakes.case import CaseState
from crashmatrix.harness.adapters.interface import Capability
from crashmatrix.harness.execution import states
from crashmatrix.harness.execution.audit import Contents, workspace_of
from crashmatrix.harness.execution.case_start import Start
from crashmatrix.harness.execution.freeze_chain import FreezeChain, Outcome, as_case, with_intrusion
from crashmatrix.harness.execution.priming import Priming, offering, primed_dir_name
from crashmatrix.harness.execution.runner import CaseRunner, case_dir_name
from crashmatrix.harness.execution.shared_tail import SharedTail, spliced
from crashmatrix.harness.execution.snapshot_audit import contents
from crashmatrix.harness.execution.snapshot_capture import BoundedCapture, Budget, Why, observation_bytes
from crashmatrix.harness.execution.snapshot_limits import LIMITS, Limits, Refused
from crashmatrix.harness.execution.states_tally import Tally
from crashmatrix.harness.execution.trees import remove_tree
from crashmatrix.harness.faults.interface import AtCrash, at_crash_of, injecting, observes_of
from crashmatrix.harness.faults.kill import KILL
from crashmatrix.harness.records.case import Case, CrashStep
from crashmatrix.harness.records.observation import Delivery, IncarnationRecord, Observation
from crashmatrix.scenarios.model import Scenario


@dataclass
class _Execution:
    """A case's incarnations, and the snapshots of its finishing one (for its extensions).

    For its FREEZE children (freeze_chain.py): its whole observation, the state its finishing
    incarnation started from (`origin`: its parent's snapshot and the fault applied to it; None:
    from scratch, a recording), and whether its settle run changed nothing."""

    incarnations: list[IncarnationRecord]
    snaps: dict[int, states.Snapshot]
    workspace_before: dict[str, str]
    obs: Observation | None = None
    refused: dict[int, Why] = field(default_factory=dict)  # events with no snapshot, and why
    witnessed: dict[int, dict[str, str]] = field(default_factory=dict)  # BoundedCapture.witnessed
    origin: tuple[states.Snapshot, str] | None = None
    hostable: bool = False
    settle_unchanged: bool = False
    # Cases whose finishing incarnations started from one state behave alike: their FREEZE
    # children share one host. The state's key, or (a recording, a real kill) the case's id.
    group: str = ""


class CrashStates:
    """The snapshots and shared recoveries of a matrix. Snapshots are kept per scenario, under
    `root/.states/<scenario>/`, until the matrix has no case of that scenario left to finish
    (`forget`): a later case may map to any state of it, so none goes earlier."""

    def __init__(self, runner: CaseRunner, root: Path, jobs: int = 1, limits: Limits = LIMITS,
                 witness: bool = False, slots: threading.BoundedSemaphore | None = None) -> None:
        """`slots`: the matrix's jobs, which its other cases hold too (`Matrix.slots`); without
        them (the pytest plugin runs one case at a time), `jobs` slots of its own."""
        self.runner = runner
        self.limits = limits  # what one state, one recording's snapshots and all of them may hold
        self.budget = Budget(limits.matrix_bytes)
        self._charged: Counter[str] = Counter()  # per scenario: what its kept snapshots hold
        self.witness = witness  # --audit-states: keep the audit's own reading beside each snapshot
        # Agents run by at most `jobs` cases at once (the matrix's `slots`, when it gives them);
        # the matrix has more threads than that, so a case waiting for a shared recovery does
        # not keep another from running.
        self.running = slots if slots is not None else threading.BoundedSemaphore(max(1, jobs))
        self.root = root / ".states"
        self._lock = threading.Lock()
        self._execs: dict[str, _Execution] = {}
        self._shared: dict[str, Future[SharedTail]] = {}
        self._keys: dict[str, tuple[str, str]] = {}  # owning case id -> (scenario, state key)
        # FREEZE children expected of the parents of a group: (scenario, group, fault) -> their
        # steps, and the group's host.
        self._expected: dict[tuple[str, str, str], set[CrashStep]] = {}
        self._chains: dict[tuple[str, str, str], FreezeChain] = {}
        self._stored: dict[bytes, bool] = {}  # a tree's digest -> its store holds the task
        # States a primed recovery owns that no case has had yet, and their scenario: a case that
        # has one counts it as distinct (and primed) then; gone when the priming's future is.
        self._unclaimed: dict[str, str] = {}
        self.tally = Tally()
        self.settled = states.Settled()

    @staticmethod
    def supported(adapter_caps: frozenset[Capability]) -> bool:
        return Capability.STATE_IN_TREE in adapter_caps

    # -- the matrix's calls ----------------------------------------------------------------
    def record(self, case: Case, scenario: Scenario, may_extend: bool,
               trace_finisher: bool = False, priming: Priming | None = None) -> Observation:
        """Run a case that is not started from a state (a recording, or a real kill), keeping
        snapshots of its finishing incarnation when it will have children (`trace_finisher`:
        traced for its system-call points too, `--syscalls`). `priming`: a recording whose crash
        cases at an event may start their recoveries as soon as its snapshot there is kept."""
        capture = None
        if may_extend and not case.blackbox:
            capture = self._capture(case.depth + 1)
            if priming is not None:
                def primer(child: Case) -> Callable[[bool], None]:
                    return functools.partial(self._prime, child, scenario, capture)

                capture.on_kept = offering(case, capture, priming, self._room_to_prime, primer)
        try:
            obs = self.runner.run(case, scenario, capture=capture, settled=self.settled,
                                  trace_finisher=trace_finisher, slot=self.running)
        except BaseException:
            self._charge(case, capture, kept=False)
            raise
        # A run with a second process in it (`second`) is not a prefix a state can stand for: its
        # intruder is part of what its children must be judged on, so they run as real kills.
        kept = capture is not None and not obs.intrusions
        self._charge(case, capture, kept)
        if capture is not None and kept:
            self._keep(case, _Execution(obs.incarnations, capture.snaps, obs.workspace_before, obs,
                                        refused=capture.refused, witnessed=capture.witnessed,
                                        hostable=case.depth == 0,
                                        settle_unchanged=capture.settle_unchanged, group=case.case_id))
        return obs

    def expect(self, children: list[Case]) -> None:
        """Cases enumerated, before any of them runs: FREEZE children of one parent share a host."""
        for child in children:
            if not child.schedule:
                continue
            step = child.schedule[-1]
            if child.blackbox or at_crash_of(self.runner.fault(step.fault)) is not AtCrash.FREEZE:
                continue
            with self._lock:
                parent = self._execs.get(_parent(child).case_id)
                if parent is not None:
                    self._expected.setdefault((child.scenario, parent.group, step.fault), set()).add(step)

    def usable(self, case: Case, scenario: Scenario) -> bool:
        """Whether the case can start from its parent's snapshot (or, a FREEZE case, share a host)."""
        if not case.schedule or case.blackbox or scenario.services:
            # A downstream service's record is not in the case tree: no snapshot holds it.
            return False
        step = case.schedule[-1]
        fault = self.runner.fault(step.fault)
        if observes_of(fault) or injecting(fault) is not None:
            return False
        with self._lock:
            parent = self._execs.get(_parent(case).case_id)
            group = (case.scenario, parent.group, step.fault) if parent else None
            expected = self._expected.get(group, set()) if group else set()
            chain = self._chains.get(group) if group else None
        if parent is None:
            return False
        if at_crash_of(fault) is AtCrash.FREEZE:
            # A host already under way serves only the points it was started with.
            return (parent.obs is not None and parent.settle_unchanged and step in expected
                    and (chain is None or step.n in chain.outcomes)
                    and (parent.hostable or parent.origin is not None))
        if at_crash_of(fault) is not AtCrash.KILL:
            return False
        if step.n in parent.snaps:
            return True
        why = parent.refused.get(step.n)
        if why is not None:  # the run says why (Tally.unkept_lines)
            with self._lock:
                self.tally.unkept[case.scenario, why[0]] += 1
                self.tally.unkept_detail.setdefault((case.scenario, why[0]), why[1])
        return False

    def forget(self, scenario: str) -> None:
        """No case of `scenario` is left to run: its snapshots and shared recoveries go."""
        prefix = f"{scenario}/"
        with self._lock:
            for case_id in [c for c in self._execs if c.startswith(prefix)]:
                del self._execs[case_id]
            for k in [k for k, (s, _) in self._keys.items() if s == scenario]:
                self._shared.pop(self._keys.pop(k)[1], None)
            for group in [g for g in self._expected if g[0] == scenario]:
                del self._expected[group]
                self._chains.pop(group, None)
            for key in [k for k, s in self._unclaimed.items() if s == scenario]:
                del self._unclaimed[key]
            self.budget.release(self._charged.pop(scenario, 0))
        remove_tree(self.root / scenario)

    def run(self, case: Case, scenario: Scenario, may_extend: bool) -> tuple[Observation, bool]:
        """The case's observation from its parent's snapshot, and whether another case ran its
        recovery (shared)."""
        step = case.schedule[-1]
        with self._lock:
            parent = self._execs[_parent(case).case_id]
        if at_crash_of(self.runner.fault(step.fault)) is AtCrash.FREEZE:
            return self._frozen(case, scenario, parent, may_extend)
        ran = self._from_state(case, scenario, parent, may_extend,
                               self.runner.config.work_root / case_dir_name(case))
        assert ran is not None  # only a primed recovery ends without an observation
        return ran

    def _room_to_prime(self) -> bool:
        """What a primed run keeps is charged to the matrix's budget while the recordings still
        take snapshots from it: none near its end, where it would decide which snapshots are
        refused (the cases then run their recoveries themselves)."""
        return self.budget.cap - self.budget.held >= self.limits.held_bytes

    def _prime(self, case: Case, scenario: Scenario, capture: BoundedCapture, may_extend: bool) -> None:
        """Run the shared recovery of `case`'s state while its recording (whose snapshots
        `capture` takes) still runs, in a directory of its own (the case itself may be started
        meanwhile, in its own): the case, and every case with its state, then splices it as from
        any other owner. Nothing when a case already owns that state."""
        # The recording as far as it has gone: its incarnation's events grow as it runs, and a
        # case reads only those up to its own event.
        assert capture.live is not None
        assert capture.workspace_before is not None
        parent = _Execution([capture.live], capture.snaps, capture.workspace_before)
        self._from_state(case, scenario, parent, may_extend,
                         self.runner.config.work_root / primed_dir_name(case), primed=True)

    def _from_state(self, case: Case, scenario: Scenario, parent: _Execution, may_extend: bool,
                    case_dir: Path, primed: bool = False) -> tuple[Observation, bool] | None:
        """`run` of a KILL case in `case_dir`; `primed`: only the shared recovery (when nobody
        owns its state yet), no observation."""
        d, step = case.depth, case.schedule[-1]
        snap = parent.snaps[step.n]
        killed = parent.incarnations[d - 1]
        prefix = [*parent.incarnations[:d - 1], dataclasses.replace(
            killed, events=killed.events[:step.n], crashed_at=step.n, exit_code=None, settle=False,
            # Its output is not known: the parent's incarnation printed on past the kill.
            timed_out=False, runaway=None, duration_ms=0.0, output=None)]
        remove_tree(case_dir)
        restored: CaseState | None = None
        # Once accepted, always (as a real run has it): an incarnation of the prefix recovered.
        recovering = any(i.command == "recover" for i in prefix)
        # The inputs and cancels delivered up to the kill (the snapshot was taken after the
        # event's delivery, as a kill comes after it): the recovery is given only the rest.
        delivered = _delivered(parent, d, step.n)
        done = sorted(x.item_id for x in delivered)
        # Keyed without the fake's request log (`states.unlogged`): the recovery is shared by
        # crash points that differ only in requests made before; each case gets its own (below).
        # Its second-process children share a host only with cases of the same log too (`group`).
        tree: states.Tree | None
        if step.fault == KILL.name:
            # A plain kill changes nothing after the kill: the snapshot is the state, keyed as it
            # is held (its own directory name masked), and written out only if this case runs it.
            accepted = recovering or self._accepted(snap, scenario, prefix)
            tree, dir_name, provider = snap.tree, snap.dir_name, snap.provider
        else:
            restored = states.restore(snap, case_dir)
            spec = self.runner.spec_for(case_dir, scenario)
            self.runner.fault(step.fault).apply(self.runner.config.adapter, spec)
            accepted = recovering or self.runner.accepted(spec, prefix)
            dir_name, provider = case_dir.name, restored
            try:
                tree = states.read_tree(case_dir, self.limits)
            except Refused:  # the fault left it over a bound: a key nothing else has, so not shared
                tree = None
        context = (scenario.name, d, accepted, done)
        if tree is None:
            key = group = f"unkept:{case.case_id}"
        else:
            key = states.tree_key(tree, dir_name, states.unlogged(provider), *context)
            # Hashing the log costs a pass over every request's messages: only for a case that
            # keeps its run for children of its own.
            group = states.tree_key(tree, dir_name, provider, *context) if may_extend else key
        with self._lock:
            future = self._shared.get(key)
            owner = future is None
            if primed and owner:
                self._unclaimed[key] = scenario.name
            elif not primed:
                self.tally.points[scenario.name] += 1
                claimed = self._unclaimed.pop(key, None) is not None
                self.tally.primed[scenario.name] += claimed
                self.tally.distinct[scenario.name] += owner or claimed
            if future is None:
                future = self._shared[key] = Future()
                self._keys[f"primed:{case.case_id}" if primed else case.case_id] = (scenario.name, key)
        if not owner:
            remove_tree(case_dir)  # a torn case's restored copy
            if primed:
                return None  # a case, or an earlier event's priming, has this state
            tail = future.result()
            obs, snaps = spliced(tail, case, prefix, parent.workspace_before, delivered, snap)
            if may_extend and (snaps or tail.refused) and self._afford(case, observation_bytes(obs, True)):
                self._keep(case, _Execution(obs.incarnations, snaps, parent.workspace_before, obs,
                                            refused=tail.refused, witnessed=tail.witnessed,
                                            origin=(snap, step.fault),
                                            settle_unchanged=tail.settle_unchanged, group=group))
            return obs, True
        capture = self._capture(d + 1) if may_extend else None
        try:
            provider = restored if restored is not None else states.restore(snap, case_dir)
            obs = self.runner.run(case, scenario, start=Start(case_dir, provider, prefix,
                                                              parent.workspace_before, accepted,
                                                              tuple(delivered)),
                                  capture=capture, settled=self.settled, slot=self.running)
        except BaseException as exc:
            with self._lock:
                self._shared.pop(key, None)  # not kept: a later case with this key runs it again
                self._unclaimed.pop(key, None)
            self._charge(case, capture, kept=False)
            future.set_exception(exc)
            raise
        # Kept for later cases with this state, and (with its snapshots) for this case's children,
        # while the matrix's budget lasts; else handed to the cases waiting for it now, and let go.
        kept = self._afford(case, observation_bytes(obs))
        self._charge(case, capture, kept)
        snaps = capture.snaps if capture is not None else {}
        refused = capture.refused if capture is not None else {}
        witnessed = capture.witnessed if capture is not None else {}
        unchanged = capture is not None and capture.settle_unchanged
        # A primed run's own prefix came from a recording still running: the case keeps its own
        # (spliced from this tail, as any case that finds its state owned).
        if capture is not None and not obs.intrusions and kept and not primed:
            self._keep(case, _Execution(obs.incarnations, snaps, parent.workspace_before, obs, refused,
                                        witnessed, origin=(snap, step.fault), settle_unchanged=unchanged,
                                        group=group))
        if not kept:
            with self._lock:
                self.tally.unshared[scenario.name] += not primed
                if self._shared.get(key) is future:
                    del self._shared[key]
                    self._unclaimed.pop(key, None)
        future.set_result(SharedTail(obs, d, snaps, (snap, step.fault), unchanged,
                                len(snap.provider.records), case_dir.name, refused, witnessed))
        return None if primed else (obs, False)

    def _frozen(self, case: Case, scenario: Scenario, parent: _Execution,
                may_extend: bool) -> tuple[Observation, bool]:
        """A FREEZE case through its parent's host (freeze_chain.py): the parent's own run with
        this point's intrusion when the intruder was clean, the host's run when it was this
        point's that changed something, else a real run."""
        step = case.schedule[-1]
        group = (case.scenario, parent.group, step.fault)
        with self._lock:
            chain = self._chains.get(group)
            owner = chain is None
            if chain is None:
                chain = self._chains[group] = FreezeChain(list(self._expected[group]))
        if owner:
            self._host(chain, case, scenario, parent)
        outcome: Outcome = chain.outcomes[step.n].result()
        if outcome.clean is not None or outcome.observation is not None:
            with self._lock:
                self.tally.frozen[case.scenario] += 1
        if outcome.clean is not None and parent.obs is not None:
            return with_intrusion(parent.obs, case, outcome.clean), True
        if outcome.observation is not None:
            return as_case(outcome.observation, case, parent.incarnations, parent.workspace_before,
                           parent.obs.deliveries if parent.obs else []), False
        return self.record(case, scenario, may_extend), False

    def _host(self, chain: FreezeChain, case: Case, scenario: Scenario, parent: _Execution) -> None:
        """Run the host: the parent's finishing incarnation again from the state it started
        from, frozen at each point of the chain in turn."""
        host = Case(case.scenario, (*case.schedule[:-1], chain.first))
        d = host.depth
        start: Start | None = None
        obs: Observation | None = None
        try:
            if parent.origin is not None:
                snap, fault = parent.origin
                case_dir = self.runner.config.work_root / case_dir_name(host)
                remove_tree(case_dir)
                provider = states.restore(snap, case_dir)
                spec = self.runner.spec_for(case_dir, scenario)
                if fault != KILL.name:
                    self.runner.fault(fault).apply(self.runner.config.adapter, spec)
                prefix = parent.incarnations[:d - 1]
                accepted = any(i.command == "recover" for i in prefix) or self.runner.accepted(spec, prefix)
                earlier = tuple(x for x in parent.obs.deliveries if x.incarnation < d) if parent.obs else ()
                start = Start(case_dir, provider, prefix, parent.workspace_before, accepted, earlier)
            with self._lock:
                self.tally.hosts[case.scenario] += 1
            obs = self.runner.run(host, scenario, start=start, settled=self.settled, chain=chain,
                                  slot=self.running)
        finally:
            chain.finish(obs if obs is not None and chain.perturbed is not None else None)

    def real_kill(self, case: Case, scenario: Scenario,
                  from_state: Observation) -> tuple[Observation, Contents, Contents]:
        """`case` run again as a real kill (`--audit-states`), and what the audit compares of
        the two besides counts (audit.Contents): the workspace each ended with, and the tree at
        the crash: the case's state restored, against the tree its recording had there (read by
        the audit's own reader when the snapshot was taken: `witness`). A second-process case
        was served by a host, from no state of its own: its workspace alone is compared."""
        step = case.schedule[-1]
        with self._lock:
            parent = self._execs.get(_parent(case).case_id)
        kill = at_crash_of(self.runner.fault(step.fault)) is AtCrash.KILL
        snap = parent.snaps.get(step.n) if parent is not None and kill else None
        left = parent.witnessed.get(step.n) if parent is not None and kill else None
        restored: dict[str, str] | None = None
        if snap is not None and left is not None:
            case_dir = self.runner.config.work_root / case_dir_name(case)
            remove_tree(case_dir)
            states.restore(snap, case_dir)
            try:
                restored = contents(case_dir)
            finally:
                remove_tree(case_dir)
        real = self.runner.run(case, scenario, slot=self.running)
        return (real, Contents(restored, workspace_of(from_state)),
                Contents(left if restored is not None else None, workspace_of(real)))

    # -- internals -------------------------------------------------------------------------
    def _capture(self, incarnation: int) -> BoundedCapture:
        return BoundedCapture(incarnation, limits=self.limits, budget=self.budget, witness=self.witness)

    def _afford(self, case: Case, n: int) -> bool:
        """Charge `n` bytes kept until the case's scenario is forgotten; False when the budget
        cannot take them (nothing is charged then)."""
        if not self.budget.charge(n):
            return False
        with self._lock:
            self._charged[case.scenario] += n
        return True

    def _charge(self, case: Case, capture: BoundedCapture | None, kept: bool) -> None:
        """What `capture` charged to the budget stays charged until its scenario is forgotten
        when its snapshots are kept, else is released now."""
        if capture is None:
            return
        if not kept:
            self.budget.release(capture.held)
            return
        with self._lock:
            self._charged[case.scenario] += capture.held

    def _accepted(self, snap: states.Snapshot, scenario: Scenario, prefix: list[IncarnationRecord]) -> bool:
        """`runner.accepted` for a case killed where `snap` was taken: from its events when they
        decide it, else from the store, read from a copy written once per distinct tree."""
        decided = self.runner.accepted_by_events(prefix)
        if decided is not None:
            return decided
        digest = snap.tree.digest(snap.dir_name)
        with self._lock:
            known = self._stored.get(digest)
        if known is None:
            # Under its own name (nothing to rewrite), in a folder of this thread's.
            where = self.root / f"store-{threading.get_ident()}" / snap.dir_name
            remove_tree(where.parent)
            states.restore(snap, where)
            try:
                known = self.runner.accepted(self.runner.spec_for(where, scenario), prefix)
            finally:
                remove_tree(where.parent)
            with self._lock:
                self._stored[digest] = known
        return known

    def _keep(self, case: Case, ex: _Execution) -> None:
        with self._lock:
            self._execs[case.case_id] = ex


def _parent(case: Case) -> Case:
    return Case(case.scenario, case.schedule[:-1])


def _delivered(parent: _Execution, d: int, n: int) -> list[Delivery]:
    """The parent's deliveries a kill at event `n` of incarnation `d` had already had."""
    return [x for x in (parent.obs.deliveries if parent.obs else [])
            if (x.incarnation, x.event_n) <= (d, n)]
