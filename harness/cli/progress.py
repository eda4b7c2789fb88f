"""A one-line progress bar on stderr (only when stderr is a terminal: CI logs stay clean)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.done = 0
        self.failed = 0
        self.started = time.monotonic()
        self._last = 0.0

    def update(self, ok: bool, known: int) -> None:
        self.done += 1
        self.failed += 0 if ok else 1
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.1 and self.done < known):
            return
        self._last = now
        width = 30
        filled = int(width * self.done / max(known, 1))
        rate = self.done / max(now - self.started, 1e-6)
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{known} cases"
                          f"  {self.failed} failed  {rate:.1f}/s ")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            self.stream.write("\n")
            self.stream.flush()
