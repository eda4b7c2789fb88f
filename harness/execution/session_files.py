"""What the harness reads of a session directory itself, without the adapter's store reader."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.execution.trees import any_nonempty_file


def holds_bytes(root: Path) -> bool:
    """Whether any file under `root` holds at least one byte."""
    return any_nonempty_file(root) if root.is_dir() else False


def count_commits(path: Path) -> int:
    """The commits a line-per-commit store file holds: its complete lines (0: no file)."""
    try:
        with path.open("rb") as f:
            # A torn last line (no newline) is not a commit: the agent will drop it on open.
            return sum(1 for line in f if line.endswith(b"\n"))
    except FileNotFoundError:
        return 0
