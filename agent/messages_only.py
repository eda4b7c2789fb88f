"""The messages-only baseline: an agent loop that saves its chat history and nothing else.

Many agent loops are durable this way: every message is appended to a log, and a restart
reloads the log and carries on. There is no intent record and no recovery rule, so a call that
was interrupted after its effect is simply run again on restart. It is a real agent of its own
(not a patch of ours), hosted through the same adapter door as any other, to show what the
matrix finds in such a loop:

    python -m crashmatrix.agent.messages_only run SESSION WORKSPACE PROVIDER_URL TOOLS TASK
    python -m crashmatrix.agent.messages_only recover SESSION WORKSPACE PROVIDER_URL TOOLS
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from crashmatrix.agent import probe as channel
from crashmatrix.agent.probe import ProbeKind, probe
from crashmatrix.agent.provider import ProviderClient, ProviderConfig, ProviderError
from crashmatrix.agent.tools import BUILTINS, CallContext, invoke

LOG = "messages.jsonl"


def history(session: Path) -> list[dict[str, Any]]:
    path = session / LOG
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def save(session: Path, messages: list[dict[str, Any]], message: dict[str, Any]) -> None:
    """Append one message as one line (and to `messages`): its line number is the commit's seq."""
    label, seq = str(message["role"]), len(messages) + 1
    probe(ProbeKind.COMMIT_BEFORE, label, seq=seq)
    with (session / LOG).open("a", encoding="utf-8") as f:
        f.write(json.dumps(message, ensure_ascii=False) + "\n")
    probe(ProbeKind.COMMIT_WRITTEN, label, seq=seq)
    messages.append(message)
    probe(ProbeKind.COMMIT_AFTER, label, seq=seq)


def unanswered(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last assistant message's calls that have no result yet."""
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    return [c for c in (last or {}).get("tool_calls") or [] if c["id"] not in answered]


def main(argv: list[str]) -> int:
    command, session_dir, workspace_dir, url, tools = argv[:5]
    session, workspace = Path(session_dir), Path(workspace_dir)
    session.mkdir(parents=True, exist_ok=True)
    channel.attach_from_env()
    client = ProviderClient(ProviderConfig(base_url=url, timeout_s=30.0))
    specs = [BUILTINS[t].spec() for t in tools.split(",") if t]
    messages = history(session)  # read once; `save` keeps it in step with the file
    if command == "run" and not messages:
        save(session, messages, {"role": "user", "content": argv[5]})
    while True:
        if messages and messages[-1]["role"] == "assistant" and not messages[-1].get("tool_calls"):
            return 0  # the final answer is saved: done
        for call in unanswered(messages):  # no intent, no rule: whatever is missing runs (again)
            name = call["function"]["name"]
            probe(ProbeKind.EFFECT_BEFORE, name, call_id=call["id"])
            # No intent record reserves an id: a downstream key can only come from the call id.
            context = CallContext(call["id"], call["id"], rerun=False)
            result = invoke(BUILTINS[name], workspace, json.loads(call["function"]["arguments"]),
                            context=context)
            probe(ProbeKind.EFFECT_AFTER, name, call_id=call["id"])
            save(session, messages, {"role": "tool", "tool_call_id": call["id"], "content": result.content})
        probe(ProbeKind.PROVIDER_BEFORE, "chat")
        try:
            reply = client.complete(messages, specs)
        except ProviderError as exc:
            print(f"provider: {exc}", file=sys.stderr)
            return 1
        probe(ProbeKind.PROVIDER_AFTER, "reply")
        save(session, messages, {k: v for k, v in reply.items() if k in ("role", "content", "tool_calls")})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
