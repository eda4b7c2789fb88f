"""An agent as a durability table's row names it (an adapter's optional `profile()`). Pure data."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    """The framework and the version hosted, where the agent's progress is stored, and what a
    restart does."""

    framework: str
    version: str
    store: str
    restart: str
