"""`run --line-coverage`'s options: what to measure, and why an agent cannot be measured."""

from __future__ import annotations

import shlex
from pathlib import Path

from crashmatrix.harness.adapters.interface import Adapter
from crashmatrix.harness.cli.exitcodes import fail
from crashmatrix.harness.execution.covered import SEPARATOR


def coverage_source_of(given: tuple[str, ...]) -> str | None:
    """`--line-coverage-source` as coverage.py is to be told it: each a package name, or a
    directory (relative to the current directory) made absolute, for the agent runs elsewhere;
    joined into the one string the spawners pass (covered.SEPARATOR). None: nothing given.
    Exit 2 for a path that is no directory, or a name the joining would split."""
    sources = []
    for name in given:
        if SEPARATOR in name or not name.strip():
            fail(f"--line-coverage-source {name!r}: give one package or directory per option "
                 f"(repeat it for several), without {SEPARATOR!r}")
        path = Path(name)
        if path.is_dir():
            sources.append(str(path.resolve()))
        elif "/" in name or name.startswith("."):
            fail(f"--line-coverage-source {name}: no such directory (relative to {Path.cwd()}); "
                 "name the package or directory the agent's code is in")
        else:
            sources.append(name)
    return SEPARATOR.join(sources) or None


def python_only(adapter: Adapter) -> None:
    """--line-coverage needs an agent the harness starts as Python (exit 2 saying why, and how)."""
    if adapter.python is None:
        fail(f"--line-coverage measures a Python agent; agent {adapter.name!r} has no Python entry "
             f"point: it starts as the program `{shlex.join(adapter.program)}`, which the harness "
             "cannot run under coverage.py. Coverage needs a Python entry point the harness starts "
             "itself: declare `python = PythonEntry(...)` in the adapter (adapters: "
             "docs/your-agent.md; PythonEntry: docs/architecture.md)")


def measured_name(adapter: Adapter, given: tuple[str, ...]) -> str:
    """What --line-coverage measures, as the user would name it (reports say "of NAME")."""
    if given:
        return ", ".join(given)
    return adapter.python.measured if adapter.python is not None else ""
