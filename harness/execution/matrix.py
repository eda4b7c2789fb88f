"""Runs a crash matrix: record each scenario, crash at every event, go deeper, write results.

Cases run on a thread pool: each case mostly waits on its agent's pipe, so threads suffice and
the fake provider, results file and progress stay in one process. Results are written as they
finish, so an interrupted matrix (SIGINT or SIGTERM) keeps what it finished.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from queue import Empty, SimpleQueue
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from crashmatrix.harness.enumeration import (
    blackbox_cases,
    calls_of,
    crash_loop_extension,
    extensions,
    in_shard,
    requests_of,
    single_crash_cases,
    variant_siblings,
)
from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.execution.audit import audited, compared
from crashmatrix.harness.execution.incarnation import kill_all
from crashmatrix.harness.execution.priming import Priming, primable
from crashmatrix.harness.execution.runner import CaseRunner, RunnerConfig
from crashmatrix.harness.execution.stop_signals import CaseAborted, Interrupted, stop_signals_handled
from crashmatrix.harness.faults.interface import has_variants_of
from crashmatrix.harness.faults.registry import faults_for
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.observation import Observation
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.harness.records.violation import InvariantId
from crashmatrix.scenarios.arrivals import parse as arrival_of
from crashmatrix.scenarios.model import Scenario

if TYPE_CHECKING:
    from crashmatrix.harness.execution.crash_states import CrashStates

_T = TypeVar("_T")

OnResult = Callable[[CaseResult, int], None]  # a finished case, and the cases known so far
# Threads per job: a case judging its observation, or (--states) waiting for a shared recovery,
# holds a thread, not a job (`Matrix.slots`).
THREADS_PER_JOB = 2
STATES_THREADS_PER_JOB = 4


@dataclass
class MatrixConfig:
    scenarios: list[Scenario]
    runner: RunnerConfig
    depth: int = 1
    jobs: int = 2
    shard: tuple[int, int] | None = None
    scenario_dirs: list[str] = field(default_factory=list)
    run_dir: str | None = None  # where repro lines `cd` first, from the repository root (portable.py)
    faults: tuple[str, ...] | None = None  # the kinds selected (--fault); None: the default set
    states: bool = False  # --states: crash cases start from recorded crash states (crash_states.py)
    audit_states: float = 0.0  # --audit-states: the share of those re-run as real kills, compared
    # --case: only these crash cases (each scenario's recording runs too: it enumerates them)
    only: frozenset[str] | None = None


class Matrix:
    def __init__(self, config: MatrixConfig) -> None:
        self.config = config
        self.stop = threading.Event()
        self.runner = CaseRunner(config.runner, self.stop)
        # At most `jobs` cases run agents at once; a case holds its slot only while they run
        # (runner.py), so reading a finished case's store and judging it overlap the next agents.
        self.slots = threading.BoundedSemaphore(max(1, config.jobs))
        self.by_name = {s.name: s for s in config.scenarios}
        # The fault kinds selected (or the default set) this agent supports, found once: every
        # crash point gets each of them that is enumerated there.
        self.faults = faults_for(config.runner.adapter, config.faults)
        # True once no case still to finish can enumerate more: the `known` handed to on_result is
        # then the matrix's total, not a floor (read it in on_result).
        self.enumerated = False
        self.enumerated_ids: set[str] = set()  # every case id enumerated (what --case may name)
        adapter = config.runner.adapter
        self.states: CrashStates | None = None
        if config.states:
            # deferred: crash_states and what only it uses are 5 ms of every start; only --states runs it
            from crashmatrix.harness.execution.crash_states import CrashStates  # noqa: PLC0415

            if CrashStates.supported(adapter.capabilities):
                self.states = CrashStates(self.runner, config.runner.work_root, config.jobs,
                                          witness=config.audit_states > 0, slots=self.slots)
        # Scenarios whose crash-free run did not do its job (`_undone`): their crash cases are
        # not run, since every one would repeat that failure and hide what a crash adds.
        self.baseline_failed: list[CaseResult] = []
        # While `run` runs with --states: where a recording offers the cases it has passed.
        self._offers: SimpleQueue[Any] | None = None

    def depth_of(self, scenario: str) -> int:
        """The run's --depth, capped by the scenario's `[matrix] max_depth`."""
        cap = self.by_name[scenario].matrix.max_depth
        return self.config.depth if cap is None else min(self.config.depth, cap)

    def _workers(self) -> int:
        """Threads for cases: more than jobs, since a case holds a job only while its agents run
        (`slots`); with --states a case may also wait for another's shared recovery."""
        jobs = max(1, self.config.jobs)
        return jobs * (STATES_THREADS_PER_JOB if self.states is not None else THREADS_PER_JOB)

    def may_extend(self, case: Case) -> bool:
        """Whether finishing `case` can enumerate further cases (as `run` does below)."""
        if case.crashes_settle:
            return False  # nothing after a settle is crashed
        loop = self.by_name[case.scenario].matrix.crash_loop
        return (case.depth == 0 or case.depth < self.depth_of(case.scenario)
                or (case.depth > 0 and case.depth < loop))

    def _may_grow(self, case: Case) -> bool:
        """Whether running it may add cases: it is extended, or its last step's fault may offer
        variants (the total is not known until it has run)."""
        last = case.schedule[-1] if case.schedule else None
        return self.may_extend(case) or (
            last is not None and last.variant is None and has_variants_of(self.runner.fault(last.fault)))

    def run_case(self, case: Case) -> CaseResult:
        scenario = self.by_name[case.scenario]
        started = time.monotonic()
        from_state = False
        # --syscalls: a case that may be extended traces its finishing incarnation (a fresh
        # process under strace), and one with a system-call step is killed by the tracer: neither
        # starts from a crash state, whose recovery may be a zygote's fork.
        traced = self.config.runner.syscalls and not case.crashes_settle and (
            case.depth == 0 or case.depth < self.depth_of(case.scenario))
        at_call = any(s.at_call for s in case.schedule)
        # A crashed settle is run whole: a crash state's capture follows the finishing incarnation.
        if self.states is None or scenario.services or case.crashes_settle:
            # A downstream service's state is not in the case tree: no crash state can hold it.
            obs = self.runner.run(case, scenario, trace_finisher=traced, slot=self.slots)
        elif not traced and not at_call and self.states.usable(case, scenario):
            obs, _shared = self.states.run(case, scenario, self.may_extend(case))
            from_state = True
        else:
            obs = self.states.record(case, scenario, self.may_extend(case), trace_finisher=traced,
                                     priming=self._priming(case, scenario))
        result = self._evaluate(obs, scenario, started)
        if from_state and self.states is not None and audited(case, self.config.audit_states):
            real_obs, ours, theirs = self.states.real_kill(case, scenario, obs)
            real = self._evaluate(real_obs, scenario, time.monotonic())
            result = compared(result, real, ours, theirs)
        return result

    def _priming(self, case: Case, scenario: Scenario) -> Priming | None:
        """For a recording whose crash cases at an event are exactly those `steps_at` names there
        (no shard to place them, no arrival, delivery or system-call point among them), and that
        start from its snapshots: offer them while it runs, so their recoveries need not wait
        for its end (`_Offered`, primed in `run`). The cases themselves still come from its
        finished trace. Not with one job: the recording holds it, so none is ever idle."""
        cfg = self.config
        if (self._offers is None or case.depth != 0 or cfg.jobs <= 1 or case.blackbox
                or cfg.runner.blackbox or cfg.runner.keep  # each kept directory is a case's own
                or cfg.shard is not None or cfg.runner.syscalls or scenario.inputs or scenario.cancels
                or arrival_of(scenario.name) is not None
                or not any(primable(f) for f in self.faults)):
            return None
        offers = self._offers
        return Priming(self.faults, lambda child, start: offers.put(_Offered(child, start)))

    def primes(self, case: Case) -> bool:
        """Whether a crash case a running recording offers is one to prime: one this run will run
        (`--case` names it, or names none)."""
        return self.config.only is None or case.case_id in self.config.only

    def _evaluate(self, obs: Observation, scenario: Scenario, started: float) -> CaseResult:
        return evaluate(obs, scenario, fsync=self.config.runner.fsync,
                        agent=self.config.runner.agent,
                        scenario_dirs=self.config.scenario_dirs, run_dir=self.config.run_dir,
                        duration_ms=(time.monotonic() - started) * 1000,
                        timeout_s=self.config.runner.case_timeout_s)

    def run(self, on_result: OnResult) -> int:
        """Run the matrix, handing each result to `on_result` (which keeps or writes it; the
        matrix keeps none, so memory stays flat however many cases run). Returns the number of
        cases run. On SIGINT or SIGTERM: kill every agent, and raise Interrupted."""
        cfg = self.config
        finished = 0
        known = 0
        position = {s.name: i for i, s in enumerate(cfg.scenarios)}
        keep_recordings = cfg.shard is None or cfg.shard[0] == 1
        with _stop_signals_at_safe_points() as interrupted, \
                ThreadPoolExecutor(max_workers=self._workers(), thread_name_prefix="case") as pool:
            pending: dict[Future[CaseResult], Case] = {}

            extending = 0  # pending cases that may add cases (`_may_grow`)

            left: Counter[str] = Counter()  # cases of each scenario submitted and not yet finished

            # Each case's future reports itself here when done: waiting on the queue costs the
            # same however many cases are pending (`wait` on all of them, each time one finishes,
            # made the harness's own work grow with the square of a deep matrix's size). A
            # recording running with --states offers here the cases it has passed (`_priming`).
            finishing: SimpleQueue[Future[Any] | _Offered] = SimpleQueue()
            self._offers = finishing if self.states is not None else None
            primed: dict[Future[Any], str] = {}  # primed recoveries running, and their scenario

            def submit(case: Case) -> None:
                nonlocal known, extending
                known += 1
                left[case.scenario] += 1
                extending += self._may_grow(case)
                future = pool.submit(self.run_case, case)
                pending[future] = case
                future.add_done_callback(finishing.put)

            for scenario in cfg.scenarios:
                submit(Case(scenario.name))
            # Offers not yet primed, per recording. Only jobs that no case holds or waits for run
            # primed recoveries, so a case is never queued behind a priming not yet begun (a
            # second-process host, the longest run of a matrix, is enumerated last); what is
            # left when the recording ends is dropped: its cases run it as usual.
            offered: dict[str, deque[_Offered]] = {}

            def prime() -> None:
                # Jobs no case holds or waits for: while the recordings run, the cases pending
                # are the recordings (or, with several scenarios, more than there are jobs).
                idle = max(1, cfg.jobs) - len(pending) - len(primed)
                for scenario_name, queue in offered.items():
                    while queue and idle > 0:
                        offer = queue.popleft()
                        # Counted among its scenario's cases left: its states stay until it has ended.
                        left[scenario_name] += 1
                        future = pool.submit(offer.start, self.may_extend(offer.case))
                        primed[future] = scenario_name
                        future.add_done_callback(finishing.put)
                        idle -= 1

            try:
                while pending or primed:
                    done = _finished(finishing, timeout=0.2)
                    if interrupted.is_set():
                        raise Interrupted(interrupted.signum)
                    for item in done:
                        if isinstance(item, _Offered):
                            if not self.stop.is_set() and self.primes(item.case):
                                offered.setdefault(item.case.scenario, deque()).append(item)
                            prime()
                            continue
                        if item in primed:
                            # Its outcome is its cases' (they wait on it or splice it). A stop
                            # is the matrix's; any other failure is the harness's, said as a
                            # case's would be (a case that met it runs its own recovery).
                            failure = item.exception()
                            if failure is not None and not isinstance(failure, CaseAborted):
                                raise failure
                            scenario_name = primed.pop(item)
                            left[scenario_name] -= 1
                            if self.states is not None and left[scenario_name] == 0:
                                self.states.forget(scenario_name)
                            prime()
                            continue
                        future = cast("Future[CaseResult]", item)
                        case = pending.pop(future)
                        if case.depth == 0:  # its offers left are its cases' own now
                            offered.pop(case.scenario, None)
                        extending -= self._may_grow(case)
                        try:
                            result = future.result()
                        except CaseAborted:
                            continue
                        children: list[Case] = []
                        if case.depth == 0 and _undone(result):
                            self.baseline_failed.append(result)
                        elif result.verdict in (Verdict.PASS, Verdict.FAIL):
                            # The other states of its last crash point, at its own depth.
                            children = variant_siblings(case, result.variants)
                            if case.depth == 0 and cfg.runner.blackbox:
                                # No probe events: the recording's store calls are the points
                                # (first incarnation only: a black-box matrix is one crash deep).
                                calls = result.store_calls[0] if result.store_calls else []
                                children += blackbox_cases(case.scenario, calls, self.faults)
                            elif case.depth == 0:
                                children += single_crash_cases(case.scenario, result.trace[0], self.faults,
                                                               requests_of(result, 0),
                                                               calls_of(result, 0), calls_of(result, 1))
                            elif case.depth < self.depth_of(case.scenario):
                                children += extensions(case, result.trace, self.faults,
                                                       result.downstream, result.syscall_points)
                            loop = crash_loop_extension(
                                case, result.trace, self.by_name[case.scenario].matrix.crash_loop,
                                result.downstream)
                            if loop is not None and loop not in children and loop.depth > cfg.depth:
                                children.append(loop)
                        # Shards split the single-crash cases by their position (stable whatever
                        # order recordings finish in); deeper cases follow their parent, whose
                        # trace only the parent's shard has.
                        if cfg.only is not None:  # what --case may name (kept only then)
                            self.enumerated_ids.update(c.case_id for c in children)
                        mine = [c for i, c in enumerate(children) if (case.depth > 0
                                or in_shard(position[case.scenario] + i, cfg.shard))
                                and (cfg.only is None or c.case_id in cfg.only)]
                        if self.states is not None:
                            self.states.expect(mine)  # before any of them runs
                        for child in mine:
                            submit(child)
                        left[case.scenario] -= 1
                        if self.states is not None and left[case.scenario] == 0:
                            self.states.forget(case.scenario)  # no case of it is left to run
                        if case.depth == 0 and not keep_recordings:
                            known -= 1
                            continue
                        finished += 1
                        self.enumerated = extending == 0
                        on_result(result, known)
            except KeyboardInterrupt:
                self._abort([*pending, *primed])
                raise
            finally:
                self._offers = None
        return finished

    def _abort(self, pending: list[Future[Any]]) -> None:
        """Stop every case and kill every agent, a hung one (and its tool) included.

        Killing is repeated until each case has returned: one that started an incarnation just
        after a kill would otherwise keep it (and the pool's shutdown would wait for it) until
        the case's deadline. The runner starts no incarnation once `stop` is set.
        """
        self.stop.set()
        for future in pending:
            future.cancel()
        while True:
            kill_all()
            _, running = wait(pending, timeout=0.1)
            if not running:
                return


@dataclass(frozen=True)
class _Offered:
    """A crash case a running recording has passed, and the call that primes its recovery."""

    case: Case
    start: Callable[[bool], None]


def _finished(finishing: SimpleQueue[_T], timeout: float) -> list[_T]:
    """The futures done since the last call, waiting up to `timeout` for the first (none: [])."""
    try:
        done = [finishing.get(timeout=timeout)]
    except Empty:
        return []
    while True:
        try:
            done.append(finishing.get_nowait())
        except Empty:
            return done


# A crash-free run violating one of these did not do the task or did not end: the agent does not
# start, or the scenario does not fit it. Any other violation of a crash-free run (a promise the
# agent's design does not keep, such as a baseline that records no intent) still leaves its crash
# cases something to show, so they run.
BASELINE_STOPS = frozenset({InvariantId.SCENARIO_ORACLE.value, InvariantId.LIVENESS.value})


def _undone(result: CaseResult) -> bool:
    """Whether a crash-free run failed in a way that makes its crash cases pointless."""
    return result.verdict is Verdict.FAIL and bool(BASELINE_STOPS.intersection(result.invariants))


class _StopRequest(threading.Event):
    """Set by the first stop signal; `signum` says which."""

    signum: int = signal.SIGINT


@contextmanager
def _stop_signals_at_safe_points() -> Iterator[_StopRequest]:
    """Turn SIGINT and SIGTERM into an event the matrix checks between waits, while it runs.

    A KeyboardInterrupt raised asynchronously can land inside concurrent.futures while the main
    thread holds a future's lock (seen: `wait` interrupted mid-`with`): the worker that then runs
    that future blocks on the lock forever, and the pool's shutdown joins it: a hung harness.
    Raised by the matrix itself, between waits, it is always safe. SIGTERM (CI cancel, `timeout`,
    container stop) is handled the same way: by default it ends the process on the spot, with
    no summary, the scratch tree left behind and hung agents running on.
    """
    request = _StopRequest()

    def handler(signum: int, frame: FrameType | None) -> None:
        if not request.is_set():
            request.signum = signum
            request.set()

    with stop_signals_handled(handler):
        yield request
