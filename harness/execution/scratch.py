"""Where cases' sessions and workspaces live while they run: RAM-backed when the machine allows.

A case creates a session and a workspace, writes a few dozen small commits and removes it all.
On a disk filesystem that costs about 10 ms of metadata work per case (measured on ext4 here,
against 0.5 ms on tmpfs), more than a forked incarnation. A SIGKILL never loses data the agent
wrote (it is in the page cache either way), so a RAM filesystem changes no verdict; only a power
cut would differ, and the matrix does not simulate those. `CRASHMATRIX_TMPDIR` overrides the
choice (an empty value means the platform's temporary directory); so does a `TMPDIR` the user
set. A RAM directory mounted `noexec` (hardened hosts do that to /dev/shm) is not used: a
scenario may run programs from its workspace.

A harness killed with SIGKILL cannot remove its tree, and RAM is not freed by a reboot-free
machine on its own: each tree's name carries its harness's pid, and each start removes the trees
of harnesses that are gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from crashmatrix.harness.execution.trees import remove_tree
from crashmatrix.harness.records.evidence import SCRATCH_TREE_NAME

RAM_CANDIDATES = (Path("/dev/shm"),)
# A matrix runs at most --jobs cases' agents at once, and holds a few times more case trees (a
# case's tree is made before it gets its job and read after it lets it go): keep a wide margin.
MIN_FREE_BYTES = 256 << 20


def scratch_parent(environ: dict[str, str] | None = None) -> str | None:
    """The directory to create scratch trees in (None: the platform's default)."""
    env = os.environ if environ is None else environ
    if "CRASHMATRIX_TMPDIR" in env:
        return env["CRASHMATRIX_TMPDIR"] or None
    if env.get("TMPDIR"):
        return None  # the user chose where temporary files go; tempfile honours it
    for candidate in RAM_CANDIDATES:
        try:
            if (candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK)
                    and not os.statvfs(candidate).f_flag & os.ST_NOEXEC
                    and shutil.disk_usage(candidate).free >= MIN_FREE_BYTES):
                return str(candidate)
        except OSError:
            continue
    return None


# PREFIX PID-RANDOM, as ScratchDir names them; PREFIX is crashmatrix-, perhaps with one word more
# (crashmatrix-explore-). tempfile's random part has no dash, so no other name of ours matches.
_TREE = re.compile(SCRATCH_TREE_NAME)
# Written into every tree at creation: a name can be anyone's (a user's `crashmatrix-2024-results`
# matches the pattern), the marker is ours alone, so a sweep never removes a tree without it.
MARKER = ".crashmatrix-scratch"


class ScratchDir(tempfile.TemporaryDirectory[str]):
    """A temporary directory named after this process, locked (flock) while it is in use.

    The lock is what a sweep trusts, not the pid alone: a harness in another pid namespace (a
    container sharing /dev/shm) has a pid that looks dead from here, but its lock still holds.
    """

    def __init__(self, prefix: str, parent: str | None) -> None:
        super().__init__(prefix=f"{prefix}{os.getpid()}-", dir=parent)
        self._lock: int | None = os.open(self.name, os.O_RDONLY | os.O_DIRECTORY)
        (Path(self.name) / MARKER).write_text(f"{os.getpid()}\n")
        with contextlib.suppress(OSError):  # a filesystem without locks: its trees are never swept
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def cleanup(self) -> None:
        try:
            super().cleanup()
        finally:
            if self._lock is not None:
                os.close(self._lock)
                self._lock = None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process has the pid now
    return True


def sweep_stale(parent: str) -> list[str]:
    """Remove the scratch trees in `parent` left by harnesses that died without cleaning up.

    Only directories (not links) this user owns, named as ScratchDir names them and holding its
    marker, whose pid is not a live process and whose lock nobody holds. Returns the paths removed.
    """
    removed: list[str] = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for entry in entries:
        match = _TREE.fullmatch(entry.name)
        if match is None or _alive(int(match["pid"])):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            marker = os.lstat(os.path.join(entry.path, MARKER))
            if not stat.S_ISREG(marker.st_mode):
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # held: its harness lives (elsewhere), or locks do not work here
        else:
            remove_tree(entry.path)
            removed.append(entry.path)
        finally:
            os.close(fd)
    return removed


def scratch_dir(prefix: str) -> ScratchDir:
    """A temporary directory for case trees, removed when the context ends; stale trees that
    killed harnesses left beside it are removed first."""
    parent = scratch_parent()
    sweep_stale(parent or tempfile.gettempdir())
    return ScratchDir(prefix, parent)
