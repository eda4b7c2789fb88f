"""A directory tree's files and folders at one moment, bytes and all: what a power loss can go back to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TreeImage:
    """`root` and everything under it, by absolute path. `exists`: whether `root` existed at all
    (a session directory the first incarnation has yet to create does not)."""

    root: str
    exists: bool
    files: Mapping[str, bytes] = field(default_factory=dict)
    dirs: frozenset[str] = frozenset()  # folders under root, root itself included when it exists
