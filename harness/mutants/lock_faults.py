"""Faulty session locking: who may write a session while another process holds it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from crashmatrix.agent import cli
from crashmatrix.agent.loop import Agent
from crashmatrix.harness.mutants.patching import Patcher

RECOVER = "recover"


class _NoLock:
    """Stands where the session lock was: takes nothing, releases nothing."""

    def acquire(self) -> None:
        pass

    def release(self) -> None:
        pass


def recover_no_lock(p: Patcher) -> None:
    build: Callable[[argparse.Namespace, dict[str, Any]], Agent] = cli._agent

    def agent(args: argparse.Namespace, settings: dict[str, Any]) -> Agent:
        built = build(args, settings)
        if args.command == RECOVER:
            # The fault: recovery opens the session without its lock (a `run` still takes it),
            # on the reasoning that a crashed process cannot be holding it anyway.
            built.lock = _NoLock()  # type: ignore[assignment]
        return built

    p.replace(cli, "_agent", agent)
