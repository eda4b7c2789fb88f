"""Runs an agent entry point under coverage.py, saving data only when the process ends normally.

A killed incarnation writes no coverage data (it never reaches `save`); a recovery that runs to
its end does. `python -m crashmatrix.harness.execution.covered DATA_FILE SOURCE ENTRY ARGS...`
in fresh mode; the zygote calls `run` in fork mode, after `measure_imports` measured, once, the
lines the agent runs when it is imported (its children are forked with it imported already).
"""

from __future__ import annotations

import importlib
import sys

import coverage


def run(data_file: str, source: str, entry: str, args: list[str]) -> int:
    cov = coverage.Coverage(data_file=data_file, branch=True, source=[source])
    cov.start()
    try:
        module_name, _, func = entry.partition(":")
        code = int(getattr(importlib.import_module(module_name), func)(args) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        cov.stop()
        cov.save()
    return code


def measure_imports(data_file: str, source: str, modules: list[str]) -> None:
    """Import `modules` under coverage and save what ran to `data_file`.

    Every incarnation runs these import-time lines (definitions, constants), so they belong to
    the recovery incarnations' coverage; measured once here, the zygote can preload the agent,
    and each measured child costs a tracer start instead of a fresh import (~140 ms on the
    reference agent). Starting a Coverage here also loads coverage.py's own lazily imported
    parts, so a child's start finds them in memory.
    """
    cov = coverage.Coverage(data_file=data_file, branch=True, source=[source])
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
