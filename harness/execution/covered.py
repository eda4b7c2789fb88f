"""Runs an agent entry point under coverage.py, saving data only when the process ends normally.

A killed incarnation writes no coverage data (it never reaches `save`); a recovery that runs to
its end does. `python -m crashmatrix.harness.execution.covered DATA_FILE SOURCE ENTRY ARGS...`
in fresh mode; the zygote calls `run` in fork mode, after `measure_imports` measured, once, the
lines the agent runs when it is imported (its children are forked with it imported already).
SOURCE is one argument: several packages or directories are joined by SEPARATOR.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import coverage

SEPARATOR = ","
# Warnings coverage.py would print into each incarnation's output, which the harness says once
# itself: a source never imported ("measured nothing", at the end of the run); and, in a child
# forked from the zygote, a source "previously imported, but not measured", which the zygote did
# measure (`measure_imports`).
QUIET = ["module-not-imported", "no-data-collected", "module-not-measured"]


def _coverage(data_file: str, source: str) -> coverage.Coverage:
    # Imported when used: the command line reads SEPARATOR from here, and a `run` without
    # --line-coverage need not load coverage.py (0.03 s of every start).
    import coverage  # noqa: PLC0415

    cov = coverage.Coverage(data_file=data_file, branch=True, source=source.split(SEPARATOR))
    cov.set_option("run:disable_warnings", QUIET)
    return cov


def _saved(data_file: str) -> None:
    """Make sure a recovery that ended leaves a data file, even one measuring nothing: an empty
    file tells "ran, but nothing of SOURCE" from "never saved" (killed) when the run combines."""
    if not os.path.exists(data_file):
        from coverage import CoverageData  # noqa: PLC0415

        CoverageData(basename=data_file).add_arcs({})


def run(data_file: str, source: str, entry: str, args: list[str]) -> int:
    cov = _coverage(data_file, source)
    cov.start()
    try:
        module_name, _, func = entry.partition(":")
        code = int(getattr(importlib.import_module(module_name), func)(args) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        cov.stop()
        cov.save()
        _saved(data_file)
    return code


def measure_imports(data_file: str, source: str, modules: list[str]) -> None:
    """Import `modules` under coverage and save what ran to `data_file`.

    Every incarnation runs these import-time lines (definitions, constants), so they belong to
    the recovery incarnations' coverage; measured once here, the zygote can preload the agent,
    and each measured child costs a tracer start instead of a fresh import (~140 ms on the
    reference agent). Starting a Coverage here also loads coverage.py's own lazily imported
    parts, so a child's start finds them in memory.
    """
    cov = _coverage(data_file, source)
    cov.start()
    try:
        for module in modules:
            importlib.import_module(module)
    finally:
        cov.stop()
        cov.save()


def main() -> None:
    data_file, source, entry, *args = sys.argv[1:]
    sys.exit(run(data_file, source, entry, args))


if __name__ == "__main__":
    main()
