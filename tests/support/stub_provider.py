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
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

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


def changelog_script(messages: list[dict[str, Any]]) -> Reply:
    """The running example, with a model that checks the file when told an outcome is unknown."""
    done = results(messages)
    append = done.get("call_1")
    if append is None:
        return tool_calls(call("call_1", "append_note", path="CHANGELOG.md", line="修复登录超时"))
    if "outcome is unknown" in append and "call_c" not in done:
        return tool_calls(call("call_c", "read", path="CHANGELOG.md"))
    if "call_c" in done and "修复登录超时" not in done["call_c"] and "call_1b" not in done:
        return tool_calls(call("call_1b", "append_note", path="CHANGELOG.md", line="修复登录超时"))
    if "call_2" not in done:
        return tool_calls(call("call_2", "bash", command="echo ran >> .witness; echo '1 passed'"))
    return answer(f"done: {done['call_2'].splitlines()[-1]}")
