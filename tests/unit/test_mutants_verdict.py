"""The verdict-power mutants (late-intent, fresh-result-id, repair-drops-one-more), in-process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import pytest

from crashmatrix.agent import records as R
from crashmatrix.agent.log import SessionLog, encode_commit
from crashmatrix.agent.records import Entry, Intent, Replay, Role
from crashmatrix.harness.mutants.catalogue import CATALOGUE, MutantName, applied
from tests.support.agent_env import Paths, make_agent, make_paths, recording
from tests.support.stub_provider import StubProvider, answer, call, changelog_script

N = MutantName
APPEND = {"path": "CHANGELOG.md", "line": "x"}


@contextmanager
def mutant(name: MutantName | None) -> Iterator[None]:
    with applied(CATALOGUE[name]) if name is not None else nullcontext():
        yield


def _prompt() -> list[Entry]:
    return [R.run_started("run-1", Intent.PROMPT), R.message("m1.0", "run-1", Role.USER, "task")]


def _assistant() -> list[Entry]:
    return [R.message("m2.0", "run-1", Role.ASSISTANT, None,
                      tool_calls=[call("call_1", "append_note", **APPEND)])]


def _started() -> list[Entry]:
    return [R.tool_started("run-1", "m2.0", "call_1", "append_note", APPEND, "m3.0", Replay.NEVER)]


def _write(paths: Paths, *commits: list[Entry], torn: list[Entry] | None = None) -> Path:
    """A log holding these commits, and half of one more when `torn` is given."""
    paths.session.mkdir(parents=True, exist_ok=True)
    data = b"".join(encode_commit(k, c) for k, c in enumerate(commits, start=1))
    if torn is not None:
        line = encode_commit(len(commits) + 1, torn)
        data += line[: len(line) // 2]
    path = paths.session / "session.jsonl"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", [None, N.LATE_INTENT])
def test_late_intent_commits_tool_started_after_the_effect(tmp_path: Path,
                                                           name: MutantName | None) -> None:
    paths = make_paths(tmp_path)
    with mutant(name), recording() as rec, StubProvider(changelog_script) as stub, \
            make_agent(paths, stub.url) as agent:
        assert agent.run_prompt("t") == "completed"
    points = rec.points()
    effect = points.index("effect.after:append_note")
    intent = points.index("commit.after:tool_started.append_note")
    result = points.index("commit.before:message.tool.append_note")
    assert (intent < effect) is (name is None)
    assert intent < result, "the intent still precedes its result"
    # The store looks the same either way (each result under its reserved id): only the order
    # of the events tells.
    starts = [e["result_id"] for e in paths.entries() if e["type"] == "tool_started"]
    assert starts == [e["id"] for e in paths.entries() if e.get("role") == "tool"]
    assert len(starts) == 2  # append_note, then bash


@pytest.mark.parametrize(("name", "result_id"), [(None, "m3.0"), (N.FRESH_RESULT_ID, "m4.c-call_1")])
def test_fresh_result_id_stores_a_repair_under_a_new_id(tmp_path: Path, name: MutantName | None,
                                                        result_id: str) -> None:
    paths = make_paths(tmp_path)
    _write(paths, _prompt(), _assistant(), _started())
    with mutant(name), StubProvider(lambda m: answer("ok")) as stub, \
            make_agent(paths, stub.url) as agent:
        agent.recover()
    (repair,) = [e for e in paths.entries() if e.get("role") == "tool"]
    assert (repair["id"], repair["recovered"]) == (result_id, "unknown")


@pytest.mark.parametrize(("name", "kept"), [(None, 3), (N.REPAIR_DROPS_ONE_MORE, 2)])
def test_repair_drops_one_more_drops_the_intent_before_a_torn_result(
        tmp_path: Path, name: MutantName | None, kept: int) -> None:
    paths = make_paths(tmp_path)
    result = [R.message("m3.0", "run-1", Role.TOOL, "ok", tool_call_id="call_1",
                        tool_name="append_note")]
    path = _write(paths, _prompt(), _assistant(), _started(), torn=result)
    with mutant(name):
        log = SessionLog(path, fsync=False)
        log.open()
        log.close()
    assert log.repair is not None
    assert len(log.commits) == kept
    assert path.read_bytes() == b"".join(
        encode_commit(k, c) for k, c in enumerate([_prompt(), _assistant(), _started()][:kept], 1))


def test_repair_drops_one_more_keeps_other_good_commits(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    path = _write(paths, _prompt(), _assistant(), torn=_started())
    with mutant(N.REPAIR_DROPS_ONE_MORE):
        log = SessionLog(path, fsync=False)
        log.open()
        log.close()
    assert len(log.commits) == 2, "only an intent is taken for part of the torn write"
