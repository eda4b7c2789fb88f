"""The app's Agents SDK (JS) session as commits and as the canonical transcript, via the host's `dump`.

The SDK ships no durable session: the app brings its own (a file, a database, a service), so
this reader does not open it. It runs the host's `dump SESSION` command, which opens the app's
session as a run does and prints `session.getItems()`: the history exactly as the SDK reads it
back on a restart. The JS SDK's items (`callId`, `function_call_result` with an `output` object)
are put into the Python SDK's shape and read by `integrations/openai_agents/store.py` for the
messages and runs. The writes differ: the JS SDK (0.20.0, measured) saves a run's items, its
input included, in one `addItems` at the very end of the run, so a commit here is one run's
items: it starts at each input message. Every crash from the first effect to that write loses
the whole run, and the restart (which re-sends the input) runs its tools again.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from crashmatrix.harness.records.transcript import Transcript
from crashmatrix.integrations.openai_agents import store as python_sdk
from crashmatrix.integrations.openai_agents_js.settings import DUMP_TIMEOUT_S

Item = Mapping[str, Any]


def normalised(item: Item) -> dict[str, Any]:
    """One JS SDK item in the Python SDK's shape (what `python_sdk` reads)."""
    kind = item.get("type", "message")
    if kind == "function_call":
        return {"type": "function_call", "call_id": item.get("callId"), "name": item.get("name"),
                "arguments": item.get("arguments", "")}
    if kind == "function_call_result":
        output = item.get("output")
        text = output.get("text", "") if isinstance(output, dict) else output
        return {"type": "function_call_output", "call_id": item.get("callId"), "output": text}
    return dict(item)


def dump(command: Sequence[str], env: Mapping[str, str],
         cwd: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """The session's items (normalised) as the host's `dump` prints them, and an error if it
    failed. `cwd`: where the app is imported (its import-time writes land there)."""
    try:
        done = subprocess.run(list(command), env=dict(env), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=DUMP_TIMEOUT_S, check=False, cwd=cwd or os.getcwd())
    except subprocess.TimeoutExpired:
        return [], f"the session could not be read: dump took more than {DUMP_TIMEOUT_S:g} s"
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        return [], f"the session could not be read (dump exited {done.returncode}): {tail}"
    try:
        items = json.loads(done.stdout.strip().splitlines()[-1])["items"]
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        return [], f"the session could not be read: dump printed no items ({exc})"
    return [normalised(i) for i in items if isinstance(i, dict)], None


def writes(items: Sequence[Item]) -> list[list[Item]]:
    """The items as the writes that made them: one per run, starting at its input."""
    out: list[list[Item]] = []
    for item in items:
        if not out or python_sdk.is_input(item):
            out.append([])
        out[-1].append(item)
    return out


def transcript_of(items: Sequence[Item], error: str | None = None) -> Transcript:
    """The transcript of the session's items: the Python SDK reader's messages and runs, with
    each seq moved to the write (the run) that saved it."""
    t = python_sdk.transcript_of(items)
    # The Python reader's commit k -> this SDK's write holding it.
    moved: dict[int, int] = {}
    write = 0
    for k, batch in enumerate(python_sdk.group(items), 1):
        if write == 0 or python_sdk.is_input(batch[0]):
            write += 1
        moved[k] = write
    batches = writes(items)
    t.commits = len(batches)
    t.labels = {k: lab for k, lab in enumerate(python_sdk.labels(batches), 1)}
    t.messages = [dataclasses.replace(m, seq=moved.get(m.seq, m.seq)) for m in t.messages]
    t.runs = [dataclasses.replace(
        r, seq=moved.get(r.seq, r.seq),
        finished_seq=None if r.finished_seq is None else moved.get(r.finished_seq, r.finished_seq))
        for r in t.runs]
    t.integrity_error = error
    return t
