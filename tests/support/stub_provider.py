"""A tiny in-test OpenAI-compatible provider: replies are a function of the request's messages."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]
Script = Callable[[list[dict[str, Any]]], Reply | int]  # an int is an HTTP error status


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}


def tool_calls(*calls: dict[str, Any]) -> Reply:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def answer(text: str) -> Reply:
    return {"role": "assistant", "content": text}


def results(messages: list[dict[str, Any]]) -> dict[str, str]:
    """call id -> result content, for every tool message in the history."""
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


class StubProvider:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[list[dict[str, Any]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body["messages"])
                reply = stub.script(body["messages"])
                if isinstance(reply, int):
                    self.send_response(reply)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = json.dumps({"choices": [{"index": 0, "message": reply}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> StubProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def calls_with_results(messages: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    """(call id, tool name, result content or None) for every call in the history, in order."""
    done = results(messages)
    out = []
    for m in messages:
        for c in m.get("tool_calls") or []:
            out.append((c["id"], c["function"]["name"], done.get(c["id"])))
    return out


def changelog_script(messages: list[dict[str, Any]]) -> Reply:
    """The running example, with a model that checks the file when told an outcome is unknown.

    It trusts only evidence: an unknown or failed read is no evidence, so it reads again.
    """
    calls = calls_with_results(messages)
    appends = [r for _, name, r in calls if name == "append_note"]
    reads = [r for _, name, r in calls if name == "read"]
    n = len(calls) + 1
    line_known = any(r is not None and not r.startswith("ERROR") for r in appends) or any(
        r is not None and not r.startswith("ERROR") and LINE in r for r in reads)
    if not appends:
        return tool_calls(call("call_1", "append_note", path="CHANGELOG.md", line=LINE))
    if not line_known:
        last_read = reads[-1] if reads else None
        checked_missing = last_read is not None and not last_read.startswith("ERROR")
        if checked_missing and (not appends[-1] or appends[-1].startswith("ERROR")) and \
                len(appends) <= len(reads):
            return tool_calls(call(f"call_{n}", "append_note", path="CHANGELOG.md", line=LINE))
        return tool_calls(call(f"call_{n}", "read", path="CHANGELOG.md"))
    bash = [r for _, name, r in calls if name == "bash"]
    if not bash:
        return tool_calls(call(f"call_{n}", "bash", command="echo ran >> .witness; echo '1 passed'"))
    return answer(f"done: {(bash[-1] or '').splitlines()[-1]}")


LINE = "修复登录超时"
