"""Paths as a printed reproduction command must hold them: relative to the repository root.

A repro line is read in a CI log and run on a laptop, in another clone of the same commit. An
absolute path names the machine that ran the matrix (`/builds/ci-runner-7/...`), so the path of
a scenario directory is printed relative to the root of the repository that holds it, and the
command runs from that root. Outside any repository, the current directory plays the root.
"""

from __future__ import annotations

import os
from pathlib import Path

# What marks a repository's root: a `.git` directory, or the `.git` file of a worktree or
# submodule. Mercurial's and Jujutsu's for the few who use them.
ROOT_MARKERS = (".git", ".hg", ".jj")


def repository_root(start: Path) -> Path | None:
    """The nearest directory at or above `start` (absolute) holding a repository marker."""
    for candidate in (start, *start.parents):
        if any((candidate / marker).exists() for marker in ROOT_MARKERS):
            return candidate
    return None


def portable_path(path: str | Path, cwd: Path | None = None) -> str:
    """`path` relative to the root of the repository holding it (else to `cwd`), `.` for the
    root itself; unchanged when it lies outside both (nothing portable can name it)."""
    here = (cwd or Path.cwd()).absolute()
    # Not resolved: a symlinked checkout keeps the names its user sees. normpath drops `..`.
    absolute = Path(os.path.normpath(here / path))
    for base in (repository_root(absolute), here):
        if base is None:
            continue
        try:
            return absolute.relative_to(base).as_posix() or "."
        except ValueError:
            continue
    return str(path)


def portable_paths(paths: list[str] | tuple[str, ...], cwd: Path | None = None) -> list[str]:
    return [portable_path(p, cwd) for p in paths]
