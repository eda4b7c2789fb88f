"""The probe seam: one call at every boundary, a no-op unless a harness is attached.

Attached means `CRASHMATRIX_PROBE=fd:R,W` names two inherited pipe descriptors. Each event is
written to W as one JSON line; the agent then needs one permit, a byte `c` read from R, before it
goes on, and blocks until the harness writes one. The harness uses the block to kill the process
exactly at an event. It may write permits ahead (N-1 of them to crash at event N, many to let an
incarnation finish), so events it will not stop at cost no round trip; an agent that reads one
byte per event sees the same protocol. Any other byte (or EOF) means the harness is gone, and the
agent stops acting.

Thread-safe: a framework calls tools and saves its store from worker threads, so one lock makes
each event's write, its number and its permit one step; events from several threads go out one
at a time, in the order the threads reach the lock. (That order is the host's to make
deterministic, e.g. by running one worker: docs/frameworks.md, "Hosting a framework".)
"""

from __future__ import annotations

import json
import os
import threading
from enum import StrEnum
from typing import Any, Protocol


class ProbeKind(StrEnum):
    COMMIT_BEFORE = "commit.before"
    COMMIT_WRITTEN = "commit.written"
    COMMIT_AFTER = "commit.after"
    EFFECT_BEFORE = "effect.before"
    EFFECT_AFTER = "effect.after"
    PROVIDER_BEFORE = "provider.before"
    PROVIDER_AFTER = "provider.after"
    INBOX_POLL = "inbox.poll"
    RECOVERY_BRANCH = "recovery.branch"


class ProbeDetached(RuntimeError):
    """The harness closed the probe channel: the agent must not take another step."""


class _Channel:
    def __init__(self, spec: str) -> None:
        if not spec.startswith("fd:"):
            raise ValueError(f"CRASHMATRIX_PROBE must look like fd:R,W, got {spec!r}")
        read_fd, write_fd = (int(x) for x in spec[3:].split(","))
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.seq = 0
        self.permits = 0  # permits the harness granted ahead and this process has read
        self._lock = threading.Lock()

    def send(self, kind: str, label: str, detail: dict[str, Any]) -> None:
        with self._lock:
            self._send(kind, label, detail)

    def _send(self, kind: str, label: str, detail: dict[str, Any]) -> None:
        self.seq += 1
        event = {"n": self.seq, "kind": kind, "label": label, "pid": os.getpid()}
        if detail:
            event["detail"] = detail
        data = (json.dumps(event, ensure_ascii=False, sort_keys=True) + "\n").encode()
        try:
            os.write(self.write_fd, data)
        except BrokenPipeError:
            raise ProbeDetached(f"probe channel closed at event {self.seq} ({kind}:{label})") from None
        if self.permits == 0:
            grant = os.read(self.read_fd, 4096)
            if not grant or grant.strip(b"c"):
                raise ProbeDetached(f"probe channel closed at event {self.seq} ({kind}:{label})")
            self.permits = len(grant)
        self.permits -= 1


class Channel(Protocol):
    def send(self, kind: str, label: str, detail: dict[str, Any]) -> None: ...


_channel: Channel | None = None


def attach_from_env() -> None:
    """Attach to the harness named in the environment, if any (called once at start-up)."""
    global _channel
    spec = os.environ.get("CRASHMATRIX_PROBE")
    _channel = _Channel(spec) if spec else None


def attach(channel: Channel | None) -> None:
    """Attach an in-process channel (tests record events this way); None detaches."""
    global _channel
    _channel = channel


def probe(kind: ProbeKind, label: str, **detail: Any) -> None:
    """Report one boundary event; blocks until the harness acknowledges it when attached."""
    if _channel is not None:
        _channel.send(kind.value, label, detail)
