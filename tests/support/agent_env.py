"""Builds agents in-process or as subprocesses over a temporary session and workspace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.agent import probe
from crashmatrix.agent.log import SessionLog, read_commits
from crashmatrix.agent.loop import Agent, AgentConfig
from crashmatrix.agent.provider import ProviderClient, ProviderConfig
from crashmatrix.agent.records import Entry, Replay
from crashmatrix.agent.tools import Registry
from crashmatrix.harness.execution.spawn import Launch

AGENT = [sys.executable, "-m", "crashmatrix.agent"]


@dataclass
class Recorder:
    """An in-process probe channel that records events (and can raise at one)."""

    events: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def send(self, kind: str, label: str, detail: dict[str, Any]) -> None:
        self.events.append((kind, label, detail))

    def points(self) -> list[str]:
        return [f"{k}:{label}" for k, label, _ in self.events]


@contextmanager
def recording() -> Iterator[Recorder]:
    rec = Recorder()
    probe.attach(rec)
    try:
        yield rec
    finally:
        probe.attach(None)


@dataclass
class Paths:
    root: Path

    @property
    def session(self) -> Path:
        return self.root / "session"

    @property
    def workspace(self) -> Path:
        return self.root / "ws"

    def entries(self) -> list[Entry]:
        commits, _ = read_commits(self.session / "session.jsonl")
        return [e for c in commits for e in c.entries]

    def commits(self) -> list[list[Entry]]:
        commits, _ = read_commits(self.session / "session.jsonl")
        return [c.entries for c in commits]


def write_log(paths: Paths, *commits: list[Entry]) -> None:
    """A session log holding these commits, as the agent writes them."""
    paths.session.mkdir(parents=True, exist_ok=True)
    log = SessionLog(paths.session / "session.jsonl", fsync=False)
    log.open()
    for entries in commits:
        log.commit(entries)
    log.close()


def make_paths(tmp_path: Path, files: dict[str, str] | None = None) -> Paths:
    paths = Paths(tmp_path)
    paths.workspace.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"CHANGELOG.md": "# Changelog\n"}).items():
        (paths.workspace / name).write_text(text, encoding="utf-8")
    return paths


def make_agent(
    paths: Paths,
    url: str | None,
    *,
    policies: dict[str, Replay] | None = None,
    budget: int = 3,
    sleeps: list[float] | None = None,
) -> Agent:
    config = AgentConfig(paths.session, paths.workspace, fsync=False, retry_delay_s=0.0,
                         resume_budget=budget)
    provider = ProviderClient(ProviderConfig(url, timeout_s=5.0)) if url else None
    sleep_log = sleeps if sleeps is not None else []
    return Agent(config, Registry.build(None, policies), provider, sleep=sleep_log.append)


def cli_args(paths: Paths, url: str | None, *extra: str) -> list[str]:
    args = [*AGENT, "--session", str(paths.session), "--workspace", str(paths.workspace),
            "--fsync", "off", "--retry-delay", "0"]
    if url:
        args += ["--provider-url", url]
    return [*args, *extra]


def launch(paths: Paths, url: str | None, *extra: str) -> Launch:
    """The same command as cli_args, for an Incarnation (fresh interpreter by default)."""
    args = cli_args(paths, url, *extra)[len(AGENT):]
    return Launch(program=tuple(AGENT), entry="crashmatrix.agent.cli:main", args=args,
                  cwd=Path.cwd(), env=dict(os.environ))


def run_cli(
    paths: Paths, url: str | None, *extra: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_args(paths, url, *extra), capture_output=True, text=True,
                          timeout=timeout, check=False)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True)
