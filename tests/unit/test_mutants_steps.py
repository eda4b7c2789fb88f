"""The mutants split-final and retry-reset change the agent as their catalogue entries say."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.agent import records as R
from crashmatrix.agent.loop import Agent, AgentConfig
from crashmatrix.agent.provider import ProviderClient, ProviderConfig
from crashmatrix.agent.records import Entry, Intent, Role
from crashmatrix.agent.recovery import RecoveryError
from crashmatrix.agent.tools import Registry
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName, applied
from tests.support.agent_env import Paths, make_paths, write_log
from tests.support.stub_provider import StubProvider, answer

N = MutantName
ANSWER = "done"


@contextmanager
def mutant(name: MutantName | None) -> Iterator[None]:
    with applied(CATALOGUE[name]) if name is not None else nullcontext():
        yield


def _agent(paths: Paths, url: str, *, max_retries: int = 3) -> Agent:
    config = AgentConfig(paths.session, paths.workspace, fsync=False, retry_delay_s=0.0,
                         max_retries=max_retries)
    return Agent(config, Registry.build(None, None),
                 ProviderClient(ProviderConfig(url, timeout_s=5.0)), sleep=lambda s: None)


def _prompt() -> list[Entry]:
    return [R.run_started("run-1", Intent.PROMPT), R.message("m1.0", "run-1", Role.USER, "task")]


def _types(paths: Paths) -> list[list[str]]:
    return [[e["type"] for e in c] for c in paths.commits()]


def _always(reply: Any) -> Any:
    return lambda messages: reply


# -- split-final ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [None, N.SPLIT_FINAL])
def test_split_final_saves_the_answer_and_the_runs_end_apart(tmp_path: Path,
                                                             name: MutantName | None) -> None:
    paths = make_paths(tmp_path)
    with mutant(name), StubProvider(_always(answer(ANSWER))) as stub, \
            _agent(paths, stub.url) as agent:
        assert agent.run_prompt("task") == "completed"
    apart = [["message"], ["run_finished"]]
    together = [["message", "run_finished"]]
    assert _types(paths)[1:] == (apart if name is not None else together)


@pytest.mark.parametrize("name", [None, N.SPLIT_FINAL])
def test_split_final_asks_again_after_a_lone_final_answer(tmp_path: Path,
                                                          name: MutantName | None) -> None:
    paths = make_paths(tmp_path)
    write_log(paths, _prompt(), [R.message("m2.0", "run-1", Role.ASSISTANT, ANSWER)])
    with mutant(name), StubProvider(_always(answer(ANSWER))) as stub, \
            _agent(paths, stub.url) as agent:
        if name is None:
            with pytest.raises(RecoveryError, match="ends in a final answer"):
                agent.recover()
            assert stub.requests == []
            return
        assert agent.recover() == "completed"
        (request,) = stub.requests
    assert request[-1] == {"role": "assistant", "content": ANSWER}, "asked after the answer"
    resumes = [e for e in paths.entries() if e["type"] == "run_started" and e["intent"] == "resume"]
    assert [r["resumed_from"] for r in resumes] == ["run-1"]


# -- retry-reset ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "attempts"), [(None, [2, 3]), (N.RETRY_RESET, [2, 1, 2, 3])])
def test_retry_reset_counts_the_attempts_afresh_after_a_crash(
        tmp_path: Path, name: MutantName | None, attempts: list[int]) -> None:
    paths = make_paths(tmp_path)
    write_log(paths, _prompt(), [R.retry_pending("run-1", 2, 0.0, "HTTP 500")])
    with mutant(name), StubProvider(_always(500)) as stub, _agent(paths, stub.url) as agent:
        assert agent.recover() == "failed"
        # Attempts left after the crash, and one failure that ends the run.
        assert len(stub.requests) == len(attempts)
    recorded = [e["attempt"] for e in paths.entries() if e["type"] == "retry_pending"]
    assert recorded == attempts


@pytest.mark.parametrize("name", [None, N.RETRY_RESET])
def test_retry_reset_counts_like_the_agent_without_a_crash(tmp_path: Path,
                                                           name: MutantName | None) -> None:
    paths = make_paths(tmp_path)
    with mutant(name), StubProvider(_always(500)) as stub, \
            _agent(paths, stub.url, max_retries=2) as agent:
        assert agent.run_prompt("task") == "failed"
        assert len(stub.requests) == 3
    assert [e["attempt"] for e in paths.entries() if e["type"] == "retry_pending"] == [1, 2]
