"""Where cases' sessions and workspaces live while they run: RAM-backed when the machine allows.

A case creates a session and a workspace, writes a few dozen small commits and removes it all.
On a disk filesystem that costs about 10 ms of metadata work per case (measured on ext4 here,
against 0.5 ms on tmpfs), more than a forked incarnation. A SIGKILL never loses data the agent
wrote (it is in the page cache either way), so a RAM filesystem changes no verdict; only a power
cut would differ, and the matrix does not simulate those. `CRASHMATRIX_TMPDIR` overrides the
choice (an empty value means the platform's temporary directory); so does a `TMPDIR` the user
set. A RAM directory mounted `noexec` (hardened hosts do that to /dev/shm) is not used: a
scenario may run programs from its workspace.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

RAM_CANDIDATES = (Path("/dev/shm"),)
MIN_FREE_BYTES = 256 << 20  # a matrix holds at most --jobs cases at once; keep a wide margin


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


def scratch_dir(prefix: str) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory for case trees, removed when the context ends."""
    return tempfile.TemporaryDirectory(prefix=prefix, dir=scratch_parent())
