"""Runs cases in enumeration order on a few threads, stopping at the first failure in that order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from crashmatrix.harness.records.case import Case
from crashmatrix.harness.records.results import CaseResult, Verdict

RunCase = Callable[[Case], CaseResult]


def run_until_failure(run: RunCase, cases: Sequence[Case], jobs: int,
                      abort: Callable[[], None]) -> list[CaseResult | None]:
    """Results by position; None for cases skipped after a failure.

    Every case before the earliest failing one is run, whatever order they finish in, so the
    first failure is the same on every run (completion order would depend on timing). On
    KeyboardInterrupt, `abort` must stop the running cases (the pool waits for them), then it
    is re-raised.
    """
    results: list[CaseResult | None] = [None] * len(cases)
    first_failure = len(cases)
    submitted = 0
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="mutant-case") as pool:
        running: dict[Future[CaseResult], int] = {}
        while True:
            while len(running) < max(1, jobs) and submitted < first_failure:
                running[pool.submit(run, cases[submitted])] = submitted
                submitted += 1
            if not running:
                return results
            try:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:
                for future in running:
                    future.cancel()
                abort()
                raise
            for future in done:
                index = running.pop(future)
                result = future.result()
                results[index] = result
                if result.verdict is Verdict.FAIL:
                    first_failure = min(first_failure, index)


def first_failure(results: Sequence[CaseResult | None]) -> CaseResult | None:
    return next((r for r in results if r is not None and r.verdict is Verdict.FAIL), None)
