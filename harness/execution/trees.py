"""Walking and removing file trees an agent made, however deep: no recursion, no path past PATH_MAX.

An agent's tool can make a directory thousands of levels deep. Python 3.11's `os.walk`,
`Path.rglob` and `shutil.rmtree` recurse once per level, so such a tree raised RecursionError
(not an OSError: `ignore_errors=True` does not catch it) in the case's clean-up, left the scratch
tree behind, and crashed every later run in the sweep of stale trees. These walk with a stack;
`remove_tree` goes down and up by descriptors (`..`), holding two at a time, so neither depth nor
the length of the path matters, and it makes a directory it cannot enter (mode 000) enterable.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def walk(top: str | Path) -> Iterator[tuple[str, list[str], list[str]]]:
    """`os.walk(top, followlinks=False)`, top-down, without recursion: (dirpath, dirnames,
    filenames), a symlink to a directory among the files; pruning `dirnames` prunes the walk.
    A directory that cannot be listed (or whose path is too long to name) is skipped."""
    stack = [os.fspath(top)]
    while stack:
        path = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        try:
            with os.scandir(path) as listing:
                for entry in listing:
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
        except OSError:
            continue
        yield path, dirs, files
        stack.extend(os.path.join(path, d) for d in reversed(dirs))


def any_nonempty_file(root: Path) -> bool:
    """Whether any regular file under `root` (not following links) holds a byte."""
    for dirpath, _, files in walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(dirpath, name))
                if stat.S_ISREG(st.st_mode) and st.st_size > 0:
                    return True
    return False


def remove_tree(path: str | Path) -> None:
    """Remove `path` and everything under it, ignoring errors, as `shutil.rmtree(path,
    ignore_errors=True)` does, at any depth. A symlink is removed, never followed."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    try:
        fd = os.open(path, _DIR | os.O_NOFOLLOW)
    except OSError:
        return
    names: list[str] = []  # the directories from `path` down to `fd`
    stuck: set[tuple[int, int]] = set()  # (dev, inode) of directories that cannot be entered
    try:
        while True:
            sub = _emptied_but_one(fd, stuck)
            if sub is not None:
                child = _enter(fd, sub, stuck)
                if child is not None:
                    os.close(fd)
                    fd = child
                    names.append(sub)
                continue
            if not names:
                break
            parent = os.open("..", _DIR, dir_fd=fd)
            os.close(fd)
            fd = parent
            with contextlib.suppress(OSError):
                os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _emptied_but_one(fd: int, stuck: set[tuple[int, int]]) -> str | None:
    """Unlink every non-directory in the directory `fd`; the name of a subdirectory left to
    empty (None when none is, but those that cannot be entered)."""
    with os.scandir(fd) as listing:
        for entry in listing:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if (st.st_dev, st.st_ino) not in stuck:
                    return entry.name
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.name, dir_fd=fd)
    return None


def _enter(fd: int, name: str, stuck: set[tuple[int, int]]) -> int | None:
    """A descriptor on the subdirectory `name` of `fd`, made enterable if need be; None (and it
    is remembered as stuck) when it cannot be."""
    for attempt in range(2):
        try:
            return os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
        except PermissionError:
            if attempt == 0:
                with contextlib.suppress(OSError):
                    os.chmod(name, 0o700, dir_fd=fd)  # a directory (not a link): lstat said so
        except OSError:
            break
    with contextlib.suppress(OSError):
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        stuck.add((st.st_dev, st.st_ino))
    return None
