"""A toy durable agent: one JSON line per commit, intent before effect, "unknown" after a crash.

    python -m toyagent.agent run SESSION WORKSPACE PROVIDER_URL TOOLS TASK
    python -m toyagent.agent recover SESSION WORKSPACE PROVIDER_URL TOOLS
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

from crashmatrix.agent.tools import BUILTINS, invoke  # the tools are not the point here
from crashmatrix.probe import probe

UNKNOWN = "ERROR: the outcome is unknown (the agent crashed while it ran); check before retrying"


def commit(log: Path, entry: dict[str, Any]) -> None:
    """Append one entry as one line; the probes around it are where crashes land."""
    probe("commit.before", entry["type"])
    with log.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    probe("commit.written", entry["type"])
    probe("commit.after", entry["type"])


def ask(url: str, messages: list[dict[str, Any]], tools: list[str]) -> dict[str, Any]:
    body = json.dumps({"model": "toy", "messages": messages,
                       "tools": [BUILTINS[t].spec() for t in tools]}).encode()
    request = urllib.request.Request(f"{url}/chat/completions", body,
                                     {"Content-Type": "application/json"})
    probe("provider.before", "chat")
    with urllib.request.urlopen(request, timeout=30) as response:
        reply: dict[str, Any] = json.load(response)["choices"][0]["message"]
    probe("provider.after", "reply")
    return reply


def call(log: Path, workspace: Path, c: dict[str, Any]) -> None:
    """Record the intent, run the tool, record the result (in that order, always)."""
    name = c["function"]["name"]
    commit(log, {"type": "started", "call_id": c["id"]})
    probe("effect.before", name, call_id=c["id"])  # which call: the verifier pairs them
    result = invoke(BUILTINS[name], workspace, json.loads(c["function"]["arguments"]))
    probe("effect.after", name, call_id=c["id"])
    commit(log, {"type": "message", "message": {
        "role": "tool", "tool_call_id": c["id"], "content": result.content}})


def main(argv: list[str]) -> int:
    command, session, workspace, url, tools = argv[:5]
    log = Path(session) / "log.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    entries = [json.loads(line) for line in log.open(encoding="utf-8")] if log.exists() else []
    if command == "run" and not entries:
        commit(log, {"type": "message", "message": {"role": "user", "content": argv[5]}})
    elif any(e["type"] == "done" for e in entries):
        return 0  # a finished run stays finished
    while True:
        entries = [json.loads(line) for line in log.open(encoding="utf-8")]
        messages = [e["message"] for e in entries if e["type"] == "message"]
        # Only what happened since the model last asked counts: call ids may repeat across turns.
        cut = max((k for k, e in enumerate(entries)
                   if e["type"] == "message" and e["message"]["role"] == "assistant"), default=-1)
        window = entries[cut + 1:]
        started = {e["call_id"] for e in window if e["type"] == "started"}
        answered = {e["message"].get("tool_call_id") for e in window if e["type"] == "message"}
        asked = entries[cut]["message"].get("tool_calls") or [] if cut >= 0 else []
        pending = [c for c in asked if c["id"] not in answered]
        for c in pending:
            if c["id"] in started:  # intent without result: it may or may not have happened
                commit(log, {"type": "message", "message": {
                    "role": "tool", "tool_call_id": c["id"], "content": UNKNOWN}})
            else:
                call(log, Path(workspace), c)
        if pending:
            continue
        if messages and messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls"):
            # Killed between the final answer and "done": the answer ended the run; asking the
            # model again would let it act after it said it was finished (final-ends-run).
            commit(log, {"type": "done"})
            return 0
        reply = ask(url, messages, tools.split(","))
        commit(log, {"type": "message", "message": reply})
        if not reply.get("tool_calls"):
            commit(log, {"type": "done"})
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
