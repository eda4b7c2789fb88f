"""The test session's set-up: the checkout's Python files byte-compiled once, before any test.

The suite starts hundreds of `crashmatrix` processes, agents and hosts from this checkout. Where
PYTHONDONTWRITEBYTECODE is set (this project's machines, some CI images) none of them writes
bytecode, so until some process that does not honour it happens to cache a module, every start
compiles each module it imports from source: `crashmatrix run --help` took 0.31 s of CPU with no
cached bytecode against 0.18 s with it, and a fresh clone's CI run compiled the tree over and over
for its first two and a half minutes. Compiling the checkout here (0.7 s) also means no test sees
bytecode appear mid-run, which changes how many files an interpreter opens as it imports: a
`--syscalls` case counts its agent's calls, and a count that drifts between the recording and
the killed run is judged nondeterministic.
"""

from __future__ import annotations

import compileall
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Not ours, or not Python we run: the virtualenv, npm packages, git's own files.
SKIPPED = re.compile(r"[/\\](\.venv|node_modules|\.git)[/\\]")


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers
def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller compiled the tree before starting it
    # quiet=2: a file that does not compile (a test's deliberately broken example) is left to
    # the test that reads it.
    compileall.compile_dir(ROOT, quiet=2, rx=SKIPPED)
