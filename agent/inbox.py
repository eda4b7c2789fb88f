"""The durable inbox: inputs and cancels dropped as files, taken in by committing them first.

A sender writes `inbox/<id>.json` atomically (temp file, fsync, rename). The agent counts an item
as received only once `input_queued` (or the cancel's `run_finished`) is committed; only then is
the file removed. A crash in between leaves the file, and the committed id makes the re-read a
no-op, so an input is neither lost nor taken twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path


class InboxKind(StrEnum):
    INPUT = "input"
    CANCEL = "cancel"


@dataclass(frozen=True)
class InboxItem:
    item_id: str
    kind: InboxKind
    text: str
    path: Path


def new_item_id() -> str:
    # Sortable by arrival; the pid breaks ties between senders in the same nanosecond.
    return f"{time.time_ns():020d}-{os.getpid()}"


def deliver(inbox: Path, kind: InboxKind, text: str = "", item_id: str | None = None) -> str:
    item_id = item_id or new_item_id()
    inbox.mkdir(parents=True, exist_ok=True)
    tmp = inbox / f".{item_id}.tmp"
    data = json.dumps({"id": item_id, "kind": kind.value, "text": text}, ensure_ascii=False)
    with tmp.open("w", encoding="utf-8") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, inbox / f"{item_id}.json")
    fd = os.open(inbox, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return item_id


def poll(inbox: Path) -> list[InboxItem]:
    """Items waiting in the inbox, in id order. Unreadable files are skipped, not deleted."""
    if not inbox.is_dir():
        return []
    items = []
    for path in sorted(inbox.glob("*.json")):
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
            items.append(InboxItem(str(obj["id"]), InboxKind(obj["kind"]), str(obj["text"]), path))
        except (OSError, ValueError, KeyError):
            continue
    return items


def remove(item: InboxItem) -> None:
    with contextlib.suppress(FileNotFoundError):
        item.path.unlink()
