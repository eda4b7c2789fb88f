"""SIGINT during a matrix is raised at a safe point, never inside concurrent.futures' locks."""

from __future__ import annotations

import os
import signal
import time

from crashmatrix.harness.execution.matrix import _sigint_at_safe_points


def test_sigint_sets_the_event_instead_of_raising_and_the_handler_comes_back() -> None:
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with _sigint_at_safe_points() as interrupted:
            os.kill(os.getpid(), signal.SIGINT)
            deadline = time.monotonic() + 5
            while not interrupted.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)  # the handler runs between bytecodes of this thread
            assert interrupted.is_set()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_an_ignored_sigint_stays_ignored() -> None:
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _sigint_at_safe_points() as interrupted:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert not interrupted.is_set()
    finally:
        signal.signal(signal.SIGINT, before)
