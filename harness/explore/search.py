"""The Hypothesis search: generate examples, judge each, and shrink the first failure to a minimum.

Hypothesis drives generation and shrinking through a `@given` test run programmatically. Each
example's verdict is memoised, so the final replay of the minimal example agrees with the first
run without running it again; once the shrink budget is spent (or the search must stop), new
examples are passed unrun, which ends shrinking with the smallest failure found so far.
With `jobs` > 1, independent searches (seeds `seed`, `seed + 1`, ...) share one case cache; the
first to find a failure shrinks it while the others stop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis.strategies import SearchStrategy

from crashmatrix.harness.execution.incarnation import kill_all
from crashmatrix.harness.execution.stop_signals import CaseAborted
from crashmatrix.harness.explore.schedule import Draw
from crashmatrix.harness.explore.trial import CaseCache, Finding, HarnessError, run_example
from crashmatrix.harness.explore.variants import Variant

Example = tuple[Variant, tuple[Draw, ...]]
OnExample = Callable[[int], None]  # examples judged so far


@dataclass(frozen=True)
class SearchConfig:
    examples: int
    seed: int
    jobs: int = 1
    ci: bool = False  # start from Hypothesis's `ci` profile (derandomized, no database)
    shrink_seconds: float = 300.0


@dataclass(frozen=True)
class SearchResult:
    examples: int  # examples that ran cases
    cases: int  # distinct cases run
    seconds: float
    finding: Finding | None
    shrink_examples: int  # examples run while shrinking
    error: str | None  # a harness error that ended the search


class PropertyFailed(Exception):
    """Raised inside the Hypothesis test for a failing example; the Finding is kept aside."""


class Judge:
    """Judges examples for every job; thread-safe."""

    def __init__(self, cache: CaseCache, shrink_seconds: float, on_example: OnExample | None) -> None:
        self.cache = cache
        self.shrink_seconds = shrink_seconds
        self.on_example = on_example
        self.stop = threading.Event()
        self.error: str | None = None
        self.examples = 0
        self.shrink_examples = 0
        self.owner: int | None = None  # the job that found the first failure and shrinks it
        self.best: Finding | None = None
        self._deadline: float | None = None
        self._memo: dict[Example, Finding | None] = {}
        self._lock = threading.Lock()

    def _skip(self, job: int) -> bool:
        if self.stop.is_set():
            return True
        if self.owner is not None and self.owner != job:
            return True  # another job is shrinking its failure: this one has nothing to add
        return self._deadline is not None and time.monotonic() > self._deadline

    def judge(self, job: int, example: Example) -> Finding | None:
        with self._lock:
            if example in self._memo:
                return self._memo[example]
            if self._skip(job):
                return None
            self.examples += 1
            count = self.examples
            if self.owner is not None:
                self.shrink_examples += 1
        try:
            finding = run_example(self.cache, *example)
        except HarnessError as exc:
            self.error = str(exc)
            self.stop.set()
            return None
        except CaseAborted:
            self.stop.set()
            return None
        with self._lock:
            self._memo[example] = finding
            if finding is not None and self.owner in (None, job):
                if self.owner is None:
                    self.owner = job
                    self._deadline = time.monotonic() + self.shrink_seconds
                # Hypothesis only tries examples simpler than its current best, so the latest
                # failure seen is the best so far.
                self.best = finding
        if self.on_example is not None:
            self.on_example(count)
        return finding


def _settings(config: SearchConfig, budget: int) -> settings:
    base = settings.get_profile("ci") if config.ci else settings()
    return settings(
        base, max_examples=budget, database=None, deadline=None,
        # explain would run more examples only to annotate the report we print ourselves.
        phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet, report_multiple_bugs=False, print_blob=False,
    )


def _job(judge: Judge, config: SearchConfig, strategy: SearchStrategy[Example], job: int, budget: int,
         failures: list[BaseException]) -> None:
    def prop(example: Example) -> None:
        if judge.judge(job, example) is not None:
            raise PropertyFailed

    test = _settings(config, budget)(seed(config.seed + job)(given(strategy)(prop)))
    try:
        test()
    except PropertyFailed:
        pass
    except BaseException as exc:  # handed to the main thread, which re-raises it
        if judge.owner != job:
            failures.append(exc)


def search(cache: CaseCache, config: SearchConfig, strategy: SearchStrategy[Example],
           on_example: OnExample | None = None) -> SearchResult:
    """Run the search over the examples `strategy` draws (strategies.examples: generated plans;
    strategies.given_examples: the user's scenarios); on KeyboardInterrupt stop every job, then
    re-raise."""
    started = time.monotonic()
    judge = Judge(cache, config.shrink_seconds, on_example)
    failures: list[BaseException] = []
    threads = []
    for job in range(config.jobs):
        budget = config.examples // config.jobs + (1 if job < config.examples % config.jobs else 0)
        if budget:
            args = (judge, config, strategy, job, budget, failures)
            threads.append(threading.Thread(target=_job, args=args, name=f"explore-{job}", daemon=True))
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        judge.stop.set()
        cache.runner.stop.set()
        kill_all()
        for t in threads:
            t.join()
        raise
    if failures and judge.error is None and judge.best is None:
        raise failures[0]
    return SearchResult(examples=judge.examples, cases=cache.runs,
                        seconds=time.monotonic() - started, finding=judge.best,
                        shrink_examples=judge.shrink_examples, error=judge.error)
