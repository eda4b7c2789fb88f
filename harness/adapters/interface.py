"""The adapter contract: how the harness starts an agent, restarts it, feeds it and reads it.

An adapter is any object with these attributes and methods, registered under the entry-point
group `crashmatrix.adapters` (see `crashmatrix.harness.plugins`). It imports nothing of the
harness but the records it returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from crashmatrix.harness.records.transcript import Transcript


class Capability(StrEnum):
    """What an adapter lets the harness do to its agent; fault kinds name what they need."""

    KILL = "kill"  # the agent runs as a process the harness may SIGKILL (every adapter)
    TEAR = "tear"  # `tear` cuts the store's last write short, as a crash mid-write leaves it


@dataclass(frozen=True)
class LaunchSpec:
    """What one incarnation needs: where, which provider, and the policies in force now."""

    session: Path
    workspace: Path
    provider_url: str
    tools: Sequence[str]
    policies: Mapping[str, str]  # tool -> safe|never overrides for this incarnation
    resume_budget: int
    max_retries: int
    retry_delay_s: float
    provider_timeout_s: float
    fsync: bool


class Adapter(Protocol):
    name: str
    module: str  # a fresh incarnation runs `python -m MODULE ARGS...`
    entry: str  # a forked incarnation calls `package.module:function(ARGS)` (returns the exit code)
    preload: tuple[str, ...]  # modules the zygote imports once, before it forks
    capabilities: frozenset[Capability]

    def start_args(self, spec: LaunchSpec, task: str) -> list[str]: ...

    def recover_args(self, spec: LaunchSpec) -> list[str]: ...

    def deliver(self, spec: LaunchSpec, kind: str, item_id: str, text: str) -> None:
        """Drop an input (kind "input") or a cancel into the agent's durable inbox."""
        ...

    def env(self) -> dict[str, str]:
        """Extra environment for every incarnation."""
        ...

    def tear(self, spec: LaunchSpec) -> None:
        """Tear the store's last write, as a crash in the middle of it would (agent is dead)."""
        ...

    def read_transcript(self, spec: LaunchSpec) -> Transcript: ...

    def declared_branches(self) -> tuple[str, ...]: ...
