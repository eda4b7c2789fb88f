"""The Responses API's stored responses of one case, so `previous_response_id` can be resolved."""

from __future__ import annotations

import threading
from typing import Any


class ResponseStore:
    """Response id -> the whole item list it ends (its input, expanded, then its output).

    The one state besides the fault schedule, and still deterministic: a response id is a hash
    of its history, so a restarted agent that resends a history gets, and stores, the same id.
    Thread-safe: a case's requests are handled concurrently.
    """

    def __init__(self) -> None:
        self._items: dict[str, list[Any]] = {}
        self._lock = threading.Lock()

    def get(self, response_id: str) -> list[Any] | None:
        with self._lock:
            items = self._items.get(response_id)
            return None if items is None else list(items)

    def put(self, response_id: str, items: list[Any]) -> None:
        with self._lock:
            self._items[response_id] = list(items)

    def snapshot(self) -> dict[str, list[Any]]:
        with self._lock:
            return {k: list(v) for k, v in self._items.items()}

    def restore(self, items: dict[str, list[Any]]) -> None:
        with self._lock:
            self._items = {k: list(v) for k, v in items.items()}
