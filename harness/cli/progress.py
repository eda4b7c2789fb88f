"""A one-line progress bar on stderr (only when stderr is a terminal: CI logs stay clean)."""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from typing import TextIO

# The rate an ETA is computed from: cases finished over about the last minute (or the last
# RECENT results), so a slow start (recording) or a change of scenario does not skew it for long.
RECENT = 200
WINDOW_S = 60.0
REDRAW_S = 0.1


def eta(seconds: float) -> str:
    """Compact, for a line that redraws: `45s`, `1m20s`, `2h05m`."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _floor_mark(stream: TextIO) -> str:
    """`≥` where the stream can show it (a terminal's encoding nearly always can)."""
    try:
        "≥".encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return ">="
    return "≥"


class Progress:
    """`update` once per finished case with the cases known so far, and whether that is the total
    (`final`): until it is, the total is shown as a floor (`≥734`) and no ETA is given, since more
    cases are still being enumerated."""

    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.clock = clock
        self.done = 0
        self.ran = 0  # of `done`, the cases run here (not results a resumed run found saved)
        self.failed = 0
        self.started = clock()
        self._last = float("-inf")
        self._recent: deque[tuple[float, int]] = deque(maxlen=RECENT)
        self._floor = _floor_mark(self.stream)

    def rate(self, now: float) -> float:
        """Cases per second over the recent window (over the whole run until it has two points)."""
        while len(self._recent) > 2 and now - self._recent[0][0] > WINDOW_S:
            self._recent.popleft()
        if len(self._recent) >= 2:
            (t0, d0), (t1, d1) = self._recent[0], self._recent[-1]
            if t1 > t0:
                return (d1 - d0) / (t1 - t0)
        return self.ran / max(now - self.started, 1e-6)

    def line(self, known: int, final: bool, now: float) -> str:
        width = 30
        filled = min(width, int(width * self.done / max(known, 1)))
        rate = self.rate(now)
        total = str(known) if final else f"{self._floor}{known}"
        text = (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{total} cases"
                f"  {self.failed} failed  {rate:.1f}/s")
        if final and rate > 0 and self.done < known:
            text += f"  ETA {eta((known - self.done) / rate)}"
        return text

    def update(self, ok: bool, known: int, final: bool = False, ran: bool = True) -> None:
        """`ran`: False for a result `--resume` found saved, which counts as done but took no
        time here (counted in the rate, a resume's first ETAs would be far too short)."""
        self.done += 1
        self.failed += 0 if ok else 1
        now = self.clock()
        if ran:
            self.ran += 1
            self._recent.append((now, self.ran))
        if not self.enabled or (now - self._last < REDRAW_S and self.done < known):
            return
        self._last = now
        # \x1b[K clears what a longer previous line left (the ETA shortens, the floor mark goes).
        self.stream.write(f"\r{self.line(known, final, now)}\x1b[K")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            self.stream.write("\n")
            self.stream.flush()
