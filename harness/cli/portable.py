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
    """`path` relative to a repository root, `.` for the root itself: the root of the repository
    the command runs in when the path lies inside it (a scenario folder in a submodule or a
    vendored repository is named from the outer checkout, where the reader of a CI log stands),
    else the root of the repository holding the path, else `cwd`; unchanged when it lies outside
    all of them (nothing portable can name it: `is_portable` says so)."""
    here = (cwd or Path.cwd()).absolute()
    # Not resolved: a symlinked checkout keeps the names its user sees. normpath drops `..`.
    absolute = Path(os.path.normpath(here / path))
    for base in (repository_root(here), repository_root(absolute), here):
        if base is None:
            continue
        try:
            return absolute.relative_to(base).as_posix() or "."
        except ValueError:
            continue
    return str(path)


def portable_paths(paths: list[str] | tuple[str, ...], cwd: Path | None = None, *,
                   from_here: bool = False) -> list[str]:
    """Each of `paths` as `portable_path` prints it; `from_here`: relative to the current directory
    instead (for a command that runs there: `run_dir`)."""
    if not from_here:
        return [portable_path(p, cwd) for p in paths]
    here = (cwd or Path.cwd()).absolute()
    root = repository_root(here) or here
    out = []
    for p in paths:
        absolute = Path(os.path.normpath(here / p))
        # Outside the repository no relative path names it on another clone: kept absolute, so
        # `is_portable` says so.
        out.append(os.path.relpath(absolute, here) if absolute.is_relative_to(root) else str(absolute))
    return out


def found_from_here(agent: str) -> bool:
    """Whether an `--agent` value is imported from the current directory: an adapter named by its
    import path (`pkg.mod:ATTR`) or a framework app of one's own (`langgraph:pkg.graph:build`); a
    registered name or a catalogued mutant is found from anywhere."""
    return ":" in agent and not agent.startswith("mutant:")


def run_dir(cwd: Path | None = None) -> str | None:
    """The current directory relative to the root of the repository holding it, when it is inside
    one and is not its root: where a repro line must `cd` for an agent found from here (a clone's
    root is where a reader of a CI log stands). None elsewhere."""
    here = (cwd or Path.cwd()).absolute()
    root = repository_root(here)
    if root is None or root == here:
        return None
    return here.relative_to(root).as_posix()


def is_portable(printed: str) -> bool:
    """Whether a path as `portable_path` printed it names no machine (it is relative)."""
    return not Path(printed).is_absolute()
