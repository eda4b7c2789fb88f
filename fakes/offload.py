"""One worker thread beside http1's loop: runs the handler of a big request while the loop serves the rest."""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")  # what the loop knows the job by (its connection)
A = TypeVar("A")  # the job's argument (a request)
R = TypeVar("R")  # its result (a reply)


class Worker(Generic[K, A, R]):
    """Runs `work` on each submitted argument, in order, on one thread started at the first job.

    One thread, not a pool: jobs are only the rare big requests, and one at a time bounds the
    memory their parsing takes. A result is collected by the loop with done(), after `wake` told
    it one is ready; a job whose `work` raised has the result None.
    """

    def __init__(self, work: Callable[[A], R], wake: Callable[[], None], name: str) -> None:
        self._work = work
        self._wake = wake
        self._name = name
        self._jobs: queue.SimpleQueue[tuple[K, A] | None] = queue.SimpleQueue()
        self._done: deque[tuple[K, R | None]] = deque()  # appended here, popped by the loop
        self._thread: threading.Thread | None = None

    def submit(self, key: K, arg: A) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        self._jobs.put((key, arg))

    def done(self) -> list[tuple[K, R | None]]:
        """The results ready now, oldest first (called on the loop's thread)."""
        out = []
        while self._done:
            out.append(self._done.popleft())
        return out

    def stop(self) -> None:
        """Let the job in hand finish, drop the rest and join the thread: once stop() returns,
        no handler runs any more (a case's record is final)."""
        if self._thread is None:
            return
        while True:  # what no one will collect is not worked on
            try:
                self._jobs.get_nowait()
            except queue.Empty:
                break
        self._jobs.put(None)
        self._thread.join()
        self._thread = None

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            key, arg = job
            result: R | None
            try:
                result = self._work(arg)
            except Exception:  # as on the loop: a failing handler ends its connection, not the server
                result = None
            self._done.append((key, result))
            self._wake()
