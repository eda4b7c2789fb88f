"""One http1 server on a thread of its own: what every fake server shares (start, stop, its port)."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Self

from crashmatrix.fakes import http1


class Served:
    """A fake served by one thread (http1's loop serves every connection; no thread per request).

    A subclass answers requests (`_answer`) and names its thread; use it as a context manager, or
    call start() and stop(). The limits left None are http1's (docs/architecture.md, the fake
    provider): `max_body` (413 over it), `max_held` (what all bodies being received may hold
    together), `socket_timeout_s` (no progress) and `request_deadline_s` (a whole request)."""

    thread_name = "fake"
    max_body = http1.MAX_BODY
    # Bodies bigger than this are handled on a worker thread, not the loop (None: never); a
    # subclass that sets it has an `_answer` safe to run beside the loop's.
    offload_over: int | None = None

    def __init__(self, address: tuple[str, int], *, max_body: int | None = None,
                 max_held: int | None = None, socket_timeout_s: float | None = None,
                 request_deadline_s: float | None = None) -> None:
        self._address = address
        if max_body is not None:
            self.max_body = max_body
        self._max_held = http1.MAX_HELD if max_held is None else max_held
        self._socket_timeout_s = socket_timeout_s
        self._request_deadline_s = request_deadline_s
        self._server: http1.Server | None = None
        self._thread: threading.Thread | None = None

    def _answer(self, request: http1.Request) -> http1.Reply:
        raise NotImplementedError

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError(f"{type(self).__name__} already started")
        self._server = http1.Server(self._address, self._answer, max_body=self.max_body,
                                    max_held=self._max_held, socket_timeout_s=self._socket_timeout_s,
                                    request_deadline_s=self._request_deadline_s,
                                    offload_over=self.offload_over)
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.thread_name,
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: held responses end at once, every socket closes, the thread is joined."""
        server, thread = self._server, self._thread
        if server is None:
            return
        server.stop()
        if thread is not None:
            thread.join()
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        """The listening socket's address as bound (host, port)."""
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._server.server_address

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def held_bytes(self) -> int:
        """The bytes of request bodies the server holds now (http1.Server.held_bytes); 0 when
        it is not started."""
        return 0 if self._server is None else self._server.held_bytes
