"""One example: the variant's crash-free case, then one more crash per draw, each case judged.

The n-th draw picks its crash point among the events of the incarnation that finished the work
in the case before it (the recording for the first draw, the recovery for later ones), so every
step lands on an event that really happens, including events of recovery itself.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from crashmatrix.harness.evaluate import evaluate
from crashmatrix.harness.execution.runner import CaseRunner
from crashmatrix.harness.explore.schedule import Draw, pick_step
from crashmatrix.harness.explore.variants import Variant
from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, Verdict
from crashmatrix.scenarios.model import Scenario


class HarnessError(RuntimeError):
    """The harness, not the agent, failed on a case: exploring further would prove nothing."""


@dataclass(frozen=True)
class Finding:
    """A case that broke the property, with everything needed to describe and replay it."""

    variant: Variant
    scenario: Scenario
    case: Case
    result: CaseResult

    @property
    def calls(self) -> int:
        return self.variant.calls

    @property
    def crashes(self) -> int:
        return self.case.depth

    def size(self) -> tuple[int, int, int]:
        """Smaller is simpler: fewer calls, fewer crashes, then earlier crash points."""
        return self.calls, self.crashes, sum(s.n for s in self.case.schedule)


class CaseCache:
    """Runs each case at most once: a case is deterministic, so its id names its result.

    Shrinking replays one variant with many schedules, and every example starts with the same
    crash-free case, so most cases come from here. Thread-safe; a case another thread is
    running is waited for rather than run twice (the two would share one case directory).
    """

    def __init__(self, runner: CaseRunner, agent: str, scenario_dirs: tuple[str, ...] = (),
                 run_dir: str | None = None) -> None:
        self.runner = runner
        self.agent = agent
        # Where the user's scenarios are, and where their app is found from: repro lines name both.
        self.scenario_dirs = scenario_dirs
        self.run_dir = run_dir
        self._done: dict[str, CaseResult] = {}
        self._running: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.runs = 0
        self.seconds = 0.0

    def result(self, case: Case, scenario: Scenario) -> CaseResult:
        while True:
            with self._lock:
                if case.case_id in self._done:
                    return self._done[case.case_id]
                busy = self._running.get(case.case_id)
                if busy is None:
                    busy = self._running[case.case_id] = threading.Event()
                    break
            busy.wait()
        try:
            result = self._run(case, scenario)
            with self._lock:
                self._done[case.case_id] = result
            return result
        finally:
            with self._lock:
                del self._running[case.case_id]
            busy.set()

    def _run(self, case: Case, scenario: Scenario) -> CaseResult:
        started = time.monotonic()
        obs = self.runner.run(case, scenario)
        elapsed = time.monotonic() - started
        cfg = self.runner.config
        result = evaluate(obs, scenario, fsync=cfg.fsync, agent=self.agent,
                          scenario_dirs=list(self.scenario_dirs), duration_ms=elapsed * 1000,
                          run_dir=self.run_dir)
        with self._lock:
            self.runs += 1
            self.seconds += elapsed
        if result.verdict is Verdict.ERROR:
            raise HarnessError(f"case {case.case_id}: {result.note}")
        return result


def run_example(cache: CaseCache, variant: Variant, draws: tuple[Draw, ...]) -> Finding | None:
    """The first case on the way that breaks the property, or None when every one held."""
    scenario = variant.scenario()
    case = Case(scenario.name)
    result = cache.result(case, scenario)
    for draw in (None, *draws):
        if draw is not None:
            trace = result.trace[case.depth] if len(result.trace) > case.depth else []
            step = pick_step(trace, draw)
            if step is None:
                return None
            case = case.extend(step)
            result = cache.result(case, scenario)
        # Verdict.NONDETERMINISTIC breaks the property too: a replay is the whole point.
        if result.verdict is not Verdict.PASS:
            return Finding(variant, scenario, case, result)
    return None
