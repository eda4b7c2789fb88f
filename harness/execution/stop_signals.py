"""The signals that stop a run cleanly, and the one way a command installs its handler for them."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

# Ctrl-C, and what CI cancel, `timeout` and container stop send.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Handler = Callable[[int, FrameType | None], None]


class Interrupted(KeyboardInterrupt):
    """A stop signal reached the harness; its text names it: "interrupted by SIGTERM".

    A KeyboardInterrupt, so whatever stops on Ctrl-C stops on SIGTERM the same way.
    """

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


@contextmanager
def stop_signals_handled(handler: Handler) -> Iterator[None]:
    """`handler` for every stop signal during the block, the previous handlers afterwards.

    An ignored SIGINT is replaced too. A shell ignores it for a job started with `cmd &` so that
    Ctrl-C at the terminal leaves the job alone, but then `kill -INT PID`, the way to stop such a
    run on purpose, does nothing at all; a long run that stops cleanly on an explicit signal is
    worth more than one that survives a stray Ctrl-C (which ends the script that waits on it).
    Only the main thread can set a handler; elsewhere (e.g. a test's thread) nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            # None: a handler installed from outside Python, which cannot be put back.
            signal.signal(s, signal.SIG_DFL if h is None else h)


class CaseAborted(Exception):
    """The matrix is stopping (SIGINT): the case is dropped, not judged."""
