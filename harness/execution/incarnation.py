"""One agent process attached to the probe channel: step it event by event, kill it, reap it.

The child runs in its own session (so its own process group); a kill takes the child itself, the
whole group and any descendants psutil can still see, and the direct child is always reaped with
`wait`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import threading
import time

import msgspec
import psutil

from crashmatrix.harness.execution.fresh import FreshSpawner
from crashmatrix.harness.execution.output_cap import CappedOutput
from crashmatrix.harness.execution.spawn import Launch, Spawner, signal_leader
from crashmatrix.harness.records.events import ProbeEvent


class IncarnationTimeout(Exception):
    """The agent neither produced an event nor exited within the deadline."""


class IncarnationRunaway(Exception):
    """The agent emitted more probe events than the step bound allows one incarnation."""

    def __init__(self, events: int, bound: int) -> None:
        super().__init__(f"{events} probe events in one incarnation, over the bound of {bound}")
        self.events = events
        self.bound = bound


class IncarnationProtocolError(Exception):
    """The agent wrote a probe line the protocol does not allow (not a JSON object with a string
    `kind` and `label`, not UTF-8, or longer than MAX_PROBE_LINE): that case's verdict, never the
    harness's death (the caller kills the agent)."""


# A probe line is a few hundred bytes; one this long without a newline is no probe event, and
# buffering more would let an agent make the harness hold gigabytes.
MAX_PROBE_LINE = 1024 * 1024


# Rounds of stop-then-read before a kill (each round finds what forked in the one before).
STOP_ROUNDS = 8
# How long a kill waits for the descendants it signalled to be gone (they are not our children:
# we cannot reap them, only see them end).
DESCENDANTS_GONE_S = 2.0

_live: set[Incarnation] = set()
_live_lock = threading.Lock()


def kill_all() -> int:
    """Kill every incarnation still running in this process (on SIGINT or SIGTERM), with its
    process group and descendants. Returns how many it killed.

    One already reaped is left alone: its pid, and so its group id, may belong to a stranger by
    now (a stopping matrix calls this repeatedly, until each case has returned).
    """
    with _live_lock:
        live = [inc for inc in _live if inc.proc.poll() is None]
    for inc in live:
        with contextlib.suppress(OSError):
            inc.kill()
    return len(live)


def _descendants(pid: int) -> list[psutil.Process]:
    """The process tree under `pid`, read before the kill (afterwards they are reparented).

    Reads /proc/PID/task/TID/children, which lists one tree, instead of psutil's recursive
    children(), which scans every process on the machine: this runs once per crash case.
    """
    found: list[psutil.Process] = []
    stack = [pid]
    while stack:
        parent = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", encoding="ascii") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            for kid in kids:
                with contextlib.suppress(psutil.Error):
                    found.append(psutil.Process(kid))
                stack.append(kid)
    return found


def _stopped_tree(pid: int) -> list[psutil.Process]:
    """The process tree under `pid`, each stopped (SIGSTOP) before the tree is read again.

    A tree read once can miss a process forked just after the read (a tool's shell starting its
    command as the deadline hits, on a loaded machine): that one would outlive the kill. A
    stopped process forks nothing, so reading until no new process appears finds them all; the
    agent and its own group are stopped first. SIGKILL ends stopped processes as well.
    """
    signal_leader(pid, signal.SIGSTOP)
    found: dict[int, psutil.Process] = {}
    for _ in range(STOP_ROUNDS):
        new = [p for p in _descendants(pid) if p.pid not in found]
        if not new:
            break
        for p in new:
            with contextlib.suppress(psutil.Error):
                p.suspend()
            found[p.pid] = p
    return list(found.values())


def _gone(p: psutil.Process) -> bool:
    """Whether `p` has ended: gone, or a zombie. A killed descendant is not our child: its new
    parent reaps it (init, or a subreaper), and one that never reaps (a container's init that
    is not a real init) would otherwise make every kill wait its whole bound."""
    try:
        return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to `timeout` for `procs` to end (see `_gone`); returns those still running."""
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if not _gone(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.01)
        alive = [p for p in alive if not _gone(p)]
    return alive


def _parsed(line: bytes, n: int) -> tuple[str, str, dict[str, object]]:
    """(kind, label, detail) of probe line `n`; IncarnationProtocolError naming what is wrong."""
    try:
        # msgspec first: the probe line is parsed for every event of every case, and json.loads
        # was the larger part of reading one. What msgspec refuses goes to json.loads, which
        # decides as it always did (it also takes NaN, 1e400 and an escaped lone surrogate).
        raw = msgspec.json.decode(line)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        try:
            raw = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise IncarnationProtocolError(f"probe line {n} is not UTF-8 JSON: {line[:80]!r}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("kind"), str) or not isinstance(
            raw.get("label"), str):
        raise IncarnationProtocolError(
            f"probe line {n} is not an object with a string kind and label: {line[:80]!r}")
    detail = raw.get("detail") or {}
    if not isinstance(detail, dict):
        raise IncarnationProtocolError(f"probe line {n}'s detail is not an object: {line[:80]!r}")
    kind, label = raw["kind"], raw["label"]
    # A case id spells the point `NN:kind:label/fault` and joins steps with `+`: a kind holding
    # `:`, `/` or `+`, or a label holding `+`, would name a case no one could run again.
    if not kind or any(c in kind for c in ":/+") or any(c.isspace() for c in kind) or "+" in label:
        raise IncarnationProtocolError(
            f"probe line {n}: kind {kind[:40]!r} or label {label[:40]!r} holds a character case ids "
            "reserve (a kind: ':', '/', '+', spaces; a label: '+')")
    return kind, label, detail


class Incarnation:
    """`max_events`: the step bound; reading one event more raises IncarnationRunaway (the caller
    kills the agent), so a loop that never ends is stopped promptly, not at the case deadline.
    The kill lands exactly as a scheduled crash at that event would."""

    def __init__(self, launch: Launch, spawner: Spawner | None = None,
                 max_events: int | None = None) -> None:
        # The agent's output goes through a pipe kept within bounds (output_cap.py), not
        # straight into a file an agent printing without end would fill the scratch disk with.
        self._output: CappedOutput | None = None
        if launch.output is not None and launch.output_fd is None:
            self._output = CappedOutput(launch.output)
            launch = dataclasses.replace(launch, output_fd=self._output.fd)
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            self.proc = (spawner or FreshSpawner()).spawn(launch, (to_child_r, from_child_w))
        except BaseException:
            os.close(to_child_w)
            os.close(from_child_r)
            if self._output is not None:
                self._output.close()
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
            if self._output is not None:
                self._output.spawned()
        self._ack_fd = to_child_w
        self._event_fd = from_child_r
        # The number the agent writes its events to (pass_fds keeps numbers): in a trace of a
        # fresh process, the writes on it are the probe events (blackbox.store_points).
        self.event_fd = from_child_w
        self._buf = b""
        self._scanned = 0  # bytes of _buf known to hold no newline (each chunk is scanned once)
        self._count = 0  # events read from the channel
        self._granted = 0  # permits written: the agent may run through this event unasked
        self._closed = False
        self._frozen = False
        self._max_events = max_events
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._event_fd, selectors.EVENT_READ)
        with _live_lock:
            _live.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def next_event(self, deadline: float) -> ProbeEvent | None:
        """The next probe event, or None once the agent closed the channel (it exited).

        Raises IncarnationRunaway on event `max_events` + 1 (the agent waits there: it is never
        granted a permit past the bound; the caller kills it), IncarnationTimeout past the
        deadline.
        """
        while (end := self._buf.find(b"\n", self._scanned)) < 0:
            self._scanned = len(self._buf)
            if self._scanned > MAX_PROBE_LINE:
                raise IncarnationProtocolError(
                    f"probe line {self._count + 1} runs past {MAX_PROBE_LINE} bytes without a newline")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise IncarnationTimeout(f"no probe event within the deadline (pid {self.pid})")
            if not self._selector.select(timeout=remaining):
                continue
            chunk = os.read(self._event_fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf, self._scanned = self._buf[:end], self._buf[end + 1 :], 0
        kind, label, detail = _parsed(line, self._count + 1)
        self._count += 1
        if self._max_events is not None and self._count > self._max_events:
            raise IncarnationRunaway(self._count, self._max_events)
        return ProbeEvent(self._count, kind, label, detail)

    def ack(self) -> None:
        """Let the agent go on past the event just read (and no further than granted before)."""
        self.permit_through(self._count)

    def permit_through(self, n: int) -> None:
        """Grant permits so the agent runs through event `n` without waiting for us.

        The agent stops at the first event it holds no permit for; so to kill it at event N the
        caller grants N-1, and events before N cost no round trip (the caller still reads each
        of them, in order, from the channel).
        """
        # Never past the step bound: the agent stops at event max_events + 1, which it reports
        # and then waits at, so the kill that follows leaves a crash state the trace describes
        # (a permit granted ahead would let it commit what no event read here records).
        if self._max_events is not None:
            n = min(n, self._max_events)
        # Callers grant at most a few hundred ahead, far below a pipe's 64 KiB, so the write
        # does not block; a short write (a signal) counts only what was written.
        while n > self._granted:
            try:
                written = os.write(self._ack_fd, b"c" * (n - self._granted))
            except BrokenPipeError:
                # The agent died between its event and our permit; the caller sees EOF next.
                self._granted = n
                return
            self._granted += written

    @property
    def events_read(self) -> int:
        return self._count

    @property
    def granted(self) -> int:
        return self._granted

    def wait(self, deadline: float) -> int:
        """Wait for exit, acknowledging any further events (used to let an agent finish)."""
        while self.next_event(deadline) is not None:
            self.ack()
        remaining = max(0.0, deadline - time.monotonic())
        try:
            return self.proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            raise IncarnationTimeout(
                f"agent pid {self.pid} closed its probe channel but did not exit"
            ) from None

    def freeze(self) -> None:
        """SIGSTOP the agent's process group: alive, its lock and files held, running nothing.

        `thaw` or `kill` must follow (`close` kills): a stopped process never ends by itself.
        The agent waits at a probe event, so no tool of its is running outside the group.
        """
        os.killpg(self.pid, signal.SIGSTOP)
        self._frozen = True

    def thaw(self) -> None:
        """SIGCONT what `freeze` stopped; nothing once it was killed (its pid may be another's)."""
        if self._frozen and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGCONT)
        self._frozen = False

    @property
    def frozen(self) -> bool:
        return self._frozen

    def signal_kill(self) -> None:
        """SIGKILL the agent and its process group, and nothing more: safe from another thread
        (the fake downstream's, at a `kill-after-apply` request); the caller's `wait` or `kill`
        reaps it, and `close` ends what it left."""
        signal_leader(self.pid, signal.SIGKILL)

    def kill(self) -> None:
        """SIGKILL the agent, its process group and every descendant, then reap the child (a
        stopped process dies of SIGKILL too)."""
        self._frozen = False
        descendants = _stopped_tree(self.pid)
        signal_leader(self.pid, signal.SIGKILL)
        for d in descendants:  # a descendant that left the group is still ours to end
            with contextlib.suppress(psutil.Error):
                d.kill()
        self.proc.wait()  # bounded: the child itself was sent SIGKILL, whatever its group
        _wait_gone(descendants, DESCENDANTS_GONE_S)

    def close(self) -> None:
        """Release the channel; kills the agent if it is still running."""
        if self._closed:
            return
        with _live_lock:
            _live.discard(self)
        if self.proc.poll() is None:
            self.kill()
        else:
            # The leader exited; anything it left in its group must not outlive the case.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        self._selector.close()
        os.close(self._ack_fd)
        os.close(self._event_fd)
        if self._output is not None:
            self._output.close()
        self._closed = True

    def __enter__(self) -> Incarnation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
