"""SIGINT and SIGTERM during a matrix stop it at a safe point, never inside concurrent.futures' locks."""

from __future__ import annotations

import os
import signal
import threading
import time
from types import FrameType

import pytest

from crashmatrix.harness.cli.main import _stop_signals_raise
from crashmatrix.harness.execution.matrix import _stop_signals_at_safe_points
from crashmatrix.harness.execution.stop_signals import Interrupted


def _delivered(event: threading.Event) -> None:
    deadline = time.monotonic() + 5
    while not event.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)  # the handler runs between bytecodes of this thread


def _signal_and_wait(signum: int) -> None:
    """Send `signum` to this process and give its handler 5 s to act (it raises, or nothing)."""
    os.kill(os.getpid(), signum)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.01)


def test_sigint_sets_the_event_instead_of_raising_and_the_handler_comes_back() -> None:
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with _stop_signals_at_safe_points() as interrupted:
            os.kill(os.getpid(), signal.SIGINT)
            _delivered(interrupted)
            assert interrupted.is_set()
            assert interrupted.signum == signal.SIGINT
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_sigterm_sets_the_event_with_its_name_and_the_handler_comes_back() -> None:
    seen: list[int] = []

    def outside(signum: int, frame: FrameType | None) -> None:  # not the default: that ends pytest
        seen.append(signum)

    before = signal.signal(signal.SIGTERM, outside)
    try:
        with _stop_signals_at_safe_points() as interrupted:
            os.kill(os.getpid(), signal.SIGTERM)
            _delivered(interrupted)
            assert interrupted.is_set()
            assert interrupted.signum == signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is outside
        assert seen == []
    finally:
        signal.signal(signal.SIGTERM, before)


def test_an_inherited_ignored_sigint_is_replaced_while_the_matrix_runs_then_restored() -> None:
    # `cmd &` in a script starts the harness with SIGINT ignored; `kill -INT PID` must still stop it.
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _stop_signals_at_safe_points() as interrupted:
            assert signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            _delivered(interrupted)
            assert interrupted.is_set()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_interrupted_is_a_keyboard_interrupt_that_names_its_signal() -> None:
    assert isinstance(Interrupted(signal.SIGTERM), KeyboardInterrupt)
    assert str(Interrupted(signal.SIGTERM)) == "interrupted by SIGTERM"
    assert str(Interrupted()) == "interrupted by SIGINT"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_outside_the_matrix_a_command_raises_interrupted_even_if_sigint_was_ignored(signum: int) -> None:
    before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(Interrupted) as raised, _stop_signals_raise():
            _signal_and_wait(signum)
        assert raised.value.signum == signum
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        for s, h in before.items():
            signal.signal(s, h)
