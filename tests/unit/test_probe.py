"""The probe channel's permits: one per event, granted ahead or one at a time, and detaching."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

import pytest

from crashmatrix.agent.probe import ProbeDetached, _Channel


@pytest.fixture
def pipes() -> Iterator[tuple[int, int, int, int]]:
    to_agent_r, to_agent_w = os.pipe()
    from_agent_r, from_agent_w = os.pipe()
    yield to_agent_r, to_agent_w, from_agent_r, from_agent_w
    for fd in (to_agent_r, to_agent_w, from_agent_r, from_agent_w):
        with contextlib.suppress(OSError):
            os.close(fd)


def _channel(pipes: tuple[int, int, int, int]) -> _Channel:
    to_agent_r, _, _, from_agent_w = pipes
    return _Channel(f"fd:{to_agent_r},{from_agent_w}")


def test_permits_written_ahead_let_that_many_events_pass_then_the_next_blocks(
        pipes: tuple[int, int, int, int]) -> None:
    channel = _channel(pipes)
    os.write(pipes[1], b"ccc")
    for _ in range(3):
        channel.send("commit.before", "x", {})
    sent = threading.Event()

    def fourth() -> None:
        channel.send("commit.written", "x", {})
        sent.set()

    worker = threading.Thread(target=fourth, daemon=True)
    worker.start()
    assert not sent.wait(0.3), "the fourth event went on without a permit"
    os.write(pipes[1], b"c")
    assert sent.wait(5)
    events = os.read(pipes[2], 65536).decode().splitlines()
    assert [e.split('"n": ')[1].split(",")[0] for e in events] == ["1", "2", "3", "4"]


def test_a_byte_other_than_a_permit_detaches(pipes: tuple[int, int, int, int]) -> None:
    channel = _channel(pipes)
    os.write(pipes[1], b"cx")
    with pytest.raises(ProbeDetached, match="event 1"):
        channel.send("commit.before", "x", {})


def test_eof_detaches(pipes: tuple[int, int, int, int]) -> None:
    channel = _channel(pipes)
    os.close(pipes[1])
    with pytest.raises(ProbeDetached, match=r"event 1 \(commit.before:x\)"):
        channel.send("commit.before", "x", {})


def test_a_closed_event_pipe_detaches(pipes: tuple[int, int, int, int]) -> None:
    channel = _channel(pipes)
    os.close(pipes[2])
    with pytest.raises(ProbeDetached):
        channel.send("commit.before", "x", {})
