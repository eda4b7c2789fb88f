"""The observation builder mirrors the real agent: same events, store, requests and workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crashmatrix.agent import probe
from crashmatrix.agent.log import read_commits
from crashmatrix.harness.records.events import ProbeEvent
from tests.support.agent_env import make_agent, make_paths
from tests.support.observations import (
    ANSWER,
    APPEND,
    BASH,
    CHANGELOG,
    READ,
    START,
    TASK,
    WITNESS,
    changelog_baseline,
    read_transcript,
)
from tests.support.stub_provider import StubProvider, answer, tool_calls


class Killed(BaseException):
    """Stands in for SIGKILL at a probe: nothing after the event runs (BaseException, so the
    agent's own error handling cannot swallow it)."""


class Channel:
    """Records events per incarnation, numbered like the harness numbers them."""

    def __init__(self) -> None:
        self.incarnations: list[list[ProbeEvent]] = []
        self.kill_at: str | None = None

    def next(self, kill_at: str | None = None) -> None:
        self.incarnations.append([])
        self.kill_at = kill_at

    def send(self, kind: str, label: str, detail: dict[str, Any]) -> None:
        events = self.incarnations[-1]
        events.append(ProbeEvent(len(events) + 1, kind, label, dict(detail)))
        if f"{kind}:{label}" == self.kill_at:
            raise Killed


def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The model of the baseline: append; told the outcome is unknown, read; test; answer."""
    done = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
    for step in (APPEND, READ, BASH):
        if step["id"] not in done:
            return tool_calls(step)
    return answer(ANSWER)


def test_builder_baseline_equals_the_agent_run_in_process(tmp_path: Path) -> None:
    paths = make_paths(tmp_path, dict(START))
    channel = Channel()
    probe.attach(channel)
    try:
        with StubProvider(script) as stub:
            channel.next(kill_at="effect.after:append_note")
            with pytest.raises(Killed), make_agent(paths, stub.url) as agent:
                agent.run_prompt(TASK)
            for _ in range(2):  # the recovery, then the runner's settle incarnation
                channel.next()
                with make_agent(paths, stub.url) as agent:
                    agent.recover()
            sent = stub.requests
    finally:
        probe.attach(None)

    built = changelog_baseline()
    assert [inc.events for inc in built.incarnations] == channel.incarnations
    commits, _ = read_commits(paths.session / "session.jsonl")
    assert built.transcript == read_transcript([c.entries for c in commits])
    assert [r.messages for r in built.requests] == sent
    workspace = {p: (paths.workspace / p).read_text(encoding="utf-8") for p in (CHANGELOG, WITNESS)}
    assert built.workspace_after == workspace

