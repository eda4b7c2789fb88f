"""Mutant agents: faulty variants of the durable agent, patched in at start, that the matrix must kill."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crashmatrix.harness.mutants.command import mutants

__all__ = ["mutants"]


def __getattr__(name: str) -> Any:
    # Every mutant incarnation imports this package (for the launcher); click, the matrix and
    # the fake provider load only when the command itself is asked for.
    if name == "mutants":
        from crashmatrix.harness.mutants.command import mutants  # noqa: PLC0415

        return mutants
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
