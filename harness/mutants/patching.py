"""Monkeypatches a mutant installs on the agent's modules, recorded so a test can undo them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Patcher:
    """Replaces attributes of modules and classes; `undo` puts the originals back, newest first.

    A mutant incarnation never undoes its patch (the process is the mutant's to the end); the
    unit tests apply mutants in-process and must leave the agent's modules as they found them.
    """

    def __init__(self) -> None:
        self._undo: list[tuple[object, str, Any]] = []

    def replace(self, owner: object, name: str, new: Any) -> None:
        if not hasattr(owner, name):
            # A renamed seam would make the mutant silently equal to the correct agent.
            raise AttributeError(f"{owner!r} has no attribute {name!r} to patch")
        self._undo.append((owner, name, getattr(owner, name)))
        setattr(owner, name, new)

    def undo(self) -> None:
        while self._undo:
            owner, name, old = self._undo.pop()
            setattr(owner, name, old)


PatchFn = Callable[[Patcher], None]
