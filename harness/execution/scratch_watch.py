"""How full the scratch filesystem got while each case ran: cases share it, so one agent filling it
can fail another case's agent, and that case's record must say so.

Cases run side by side (--jobs) in trees on one filesystem (RAM-backed where possible:
scratch.py). An agent that fills it fails the others' writes with ENOSPC, and by the time those
cases end the filler's tree may be gone and the space back: a check at a case's end alone would
see nothing. So one thread per filesystem samples its free space a few times a second and keeps
the moments it was low; a case asks, at its end, for the lowest free space seen since it began.
One statvfs per sample: nothing a matrix notices.
"""

from __future__ import annotations

import collections
import os
import shutil
import stat
import threading
import time
from dataclasses import dataclass

from crashmatrix.harness.execution.trees import walk

LOW_FREE_BYTES = 32 << 20  # low: less than this free, or less than LOW_FREE_FRACTION of the size
LOW_FREE_FRACTION = 0.02
INTERVAL_S = 0.1
KEPT_SAMPLES = 4096  # low moments kept: a filesystem low for minutes keeps its latest


@dataclass(frozen=True)
class Low:
    free: int  # the lowest free bytes seen
    total: int
    path: str


class ScratchWatch:
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._low: collections.deque[tuple[float, int]] = collections.deque(maxlen=KEPT_SAMPLES)
        self._total = 0
        self.cases_low = 0  # cases that ended having seen it low
        self.biggest: tuple[str, int] | None = None  # the largest case tree measured, (case, bytes)
        threading.Thread(target=self._sample_forever, name="scratch watch", daemon=True).start()

    def _sample(self) -> None:
        try:
            usage = shutil.disk_usage(self.path)
        except OSError:
            return
        if usage.free < max(LOW_FREE_BYTES, int(usage.total * LOW_FREE_FRACTION)):
            with self._lock:
                self._low.append((time.monotonic(), usage.free))
                self._total = usage.total

    def _sample_forever(self) -> None:
        while True:
            self._sample()
            time.sleep(INTERVAL_S)

    def lowest_since(self, since: float) -> Low | None:
        """The lowest free space seen low since `since` (a sample is taken now too), or None."""
        self._sample()
        with self._lock:
            seen = [free for t, free in self._low if t >= since]
            return Low(min(seen), self._total, self.path) if seen else None

    def measured(self, case: str, size: int) -> None:
        with self._lock:
            self.cases_low += 1
            if self.biggest is None or size > self.biggest[1]:
                self.biggest = (case, size)


_watches: dict[str, ScratchWatch] = {}
_watches_lock = threading.Lock()


def watch(path: str) -> ScratchWatch:
    """The watch of the filesystem `path` is on (one per filesystem per process)."""
    try:
        key = str(os.stat(path).st_dev)
    except OSError:
        key = path
    with _watches_lock:
        if key not in _watches:
            _watches[key] = ScratchWatch(path)
        return _watches[key]


def watches() -> list[ScratchWatch]:
    with _watches_lock:
        return list(_watches.values())


def tree_bytes(root: str) -> int:
    """The space the files under `root` take (allocated blocks: a sparse file counts what it holds)."""
    total = 0
    for dirpath, dirs, files in walk(root):
        for name in [*dirs, *files]:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if not stat.S_ISLNK(st.st_mode):
                total += st.st_blocks * 512
    return total


def low_note(low: Low, case_bytes: int) -> str:
    return (f"the scratch filesystem ({low.path}) had only {low.free} of {low.total} bytes free while "
            f"this case ran (this case's tree held {case_bytes} bytes at its end): cases running at "
            "the same time share it (--jobs), so another case's agent filling it can make this "
            "one's writes fail")
