"""An incarnation's output kept within bounds: its start and its end, with a note of what was cut.

An agent's stdout and stderr used to go straight into a file in its case tree, on a RAM
filesystem: an agent printing without end filled it (2.3 GB at --jobs 2 in an audit), and with
it every other case's room. Its output now goes through a pipe that a harness thread drains: the
first HEAD_BYTES are written as they come, after that only the last TAIL_BYTES are held (in
memory, a ring), and when the incarnation ends the file gets a line saying how many bytes were
cut, then that end. The end is what a report shows (why a process stopped); the start is what a
person reading a kept tree looks for first (how it began). A pipe also stalls an agent that
prints faster than the harness drains, rather than the disk paying for it.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from pathlib import Path

from crashmatrix.harness.records.observation import RawOutput
from crashmatrix.harness.records.output_tail import WINDOW

HEAD_BYTES = 1 << 20
TAIL_BYTES = 256 << 10
CHUNK = 1 << 16
# How long `close` waits for the writers' last bytes once the incarnation is gone: its children
# were killed with it, but a daemon that left its group may hold the pipe open for ever.
DRAIN_S = 0.5


def cut_note(cut: int, head: int, tail: int) -> bytes:
    return (f"\n[crashmatrix: {cut} bytes of this output were cut here; the first {head} and the "
            f"last {tail} bytes are kept]\n").encode()


class CappedOutput:
    """A pipe whose write end (`fd`) the agent's stdout and stderr take, drained into `path`."""

    def __init__(self, path: Path, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self._head, self._tail = head, tail
        self._file = path.open("ab")
        self._read_fd, self.fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self._stop = threading.Event()
        self.written = 0  # bytes the agent wrote, kept or not
        self.cut = 0
        self._ring = bytearray()
        self._thread = threading.Thread(target=self._drain, name=f"output {path.name}", daemon=True)
        self._thread.start()

    def spawned(self) -> None:
        """The agent holds its copy of the write end: the harness's is closed, so the pipe ends
        when the agent's last process does."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _take(self, chunk: bytes) -> None:
        kept_head = min(len(chunk), max(0, self._head - self.written))
        if kept_head:
            self._file.write(chunk[:kept_head])
        self.written += len(chunk)
        rest = chunk[kept_head:]
        if rest:
            self._ring += rest
            if len(self._ring) > self._tail:
                over = len(self._ring) - self._tail
                self.cut += over
                del self._ring[:over]  # cheap: bytearray drops its front without copying

    def _drain(self) -> None:
        until: float | None = None  # set once `close` asked: a writer that never stops is cut off
        try:
            while True:
                if until is None and self._stop.is_set():
                    until = time.monotonic() + DRAIN_S
                if until is not None and time.monotonic() > until:
                    return
                ready, _, _ = select.select([self._read_fd], [], [], 0.1 if until is None else DRAIN_S)
                if not ready:
                    if until is not None:
                        return
                    continue
                try:
                    chunk = os.read(self._read_fd, CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    return
                self._take(chunk)
        finally:
            self._finish()

    def _finish(self) -> None:
        with contextlib.suppress(OSError):
            if self.cut:
                self._file.write(cut_note(self.cut, self._head, self._tail))
            self._file.write(self._ring)
        with contextlib.suppress(OSError):
            self._file.close()
        os.close(self._read_fd)

    def close(self) -> None:
        """After the incarnation ended: take what is left in the pipe, write the end, close."""
        self.spawned()
        self._stop.set()
        self._thread.join()


def output_end(path: Path) -> RawOutput | None:
    """The last WINDOW bytes of an incarnation's output file; None when it cannot be read (no
    file: nothing was spawned). One open and one short read: a passing case pays little for it."""
    try:
        with path.open("rb") as f:
            skipped = max(0, os.fstat(f.fileno()).st_size - WINDOW)
            if skipped:
                f.seek(skipped)
            return RawOutput(f.read(WINDOW), skipped)
    except OSError:
        return None
