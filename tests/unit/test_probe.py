"""The probe channel's permits: one per event, granted ahead or one at a time, and detaching."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
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


def test_events_from_many_threads_go_out_whole_numbered_once_each_with_one_permit(
        pipes: tuple[int, int, int, int]) -> None:
    """A framework probes from its worker threads: each event's line, number and permit is one
    step, so the harness reads whole lines numbered 1..N and grants exactly one permit each."""
    channel = _channel(pipes)
    threads, each = 8, 150
    lines: list[str] = []

    def harness() -> None:  # one permit per event line, as the harness does when it stops at none
        pending = b""
        while len(lines) < threads * each:
            chunk = os.read(pipes[2], 65536)
            if not chunk:
                return
            pending += chunk
            *whole, pending = pending.split(b"\n")
            lines.extend(w.decode() for w in whole)
            if whole:
                os.write(pipes[1], b"c" * len(whole))

    def agent_thread(k: int) -> None:
        for i in range(each):
            channel.send("effect.before", f"t{k}", {"i": i})

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show at once
    try:
        reader = threading.Thread(target=harness, daemon=True)
        reader.start()
        workers = [threading.Thread(target=agent_thread, args=(k,), daemon=True) for k in range(threads)]
        for w in workers:
            w.start()
        deadline = time.monotonic() + 15
        for w in workers:
            w.join(max(0.0, deadline - time.monotonic()))
        stuck = sum(w.is_alive() for w in workers)
        if stuck:  # let every thread go before failing: detach the agent, end the harness's read
            os.write(pipes[1], b"x" * threads)
            os.close(pipes[3])
        reader.join(5)
        assert not stuck, f"{stuck} thread(s) wait for a permit they were owed"
    finally:
        sys.setswitchinterval(old)
    events = [json.loads(line) for line in lines]
    assert [e["n"] for e in events] == list(range(1, threads * each + 1))
    for k in range(threads):
        assert [e["detail"]["i"] for e in events if e["label"] == f"t{k}"] == list(range(each))
