"""An agent on the Responses or Anthropic wire, SIGKILLed after a tool's effect and restarted:
the fake answers the resent history exactly as before, and keeps what a wire must keep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.fakes import FakeProvider
from crashmatrix.scenarios import load_builtin

pytestmark = pytest.mark.crash

# A deliberately naive agent loop: it saves its history only after each tool's result, so a
# kill between the effect and the save makes the restart resend the previous request.
AGENT = r'''
import json, sys, time, urllib.request
url, wire, session, effects, pause = sys.argv[1:]
def load():
    try:
        return json.load(open(session))
    except FileNotFoundError:
        return {"history": [], "previous": None}
def post(body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())
def run_tool(name, args):
    if name == "append_note":
        with open(effects, "a") as f:
            f.write(args["line"] + "\n")
        print("EFFECT", flush=True)
        if pause == "pause":
            time.sleep(30)  # the test kills the agent here, before the result is saved
        return "appended 1 line to " + args["path"]
    if name == "read":
        return "# Changelog\n\n" + open(effects).read()
    return "exit code 0\n1 passed"
state = load()
task = "Append the line to CHANGELOG.md, then run the tests."
while True:
    if wire == "responses":
        body = {"model": "m", "instructions": "sys"}
        body |= ({"previous_response_id": state["previous"], "input": state["history"]}
                 if state["previous"] else {"input": [{"role": "user", "content": task}]})
        got = post(body)
        calls = [(o["call_id"], o["name"], json.loads(o["arguments"]))
                 for o in got["output"] if o["type"] == "function_call"]
    else:
        history = state["history"] or [{"role": "user", "content": task}]
        got = post({"model": "m", "max_tokens": 100, "system": "sys", "messages": history})
        calls = [(b["id"], b["name"], b["input"]) for b in got["content"]
                 if b["type"] == "tool_use"]
    print("REPLY", got["id"], json.dumps([c[0] for c in calls]), flush=True)
    if not calls:
        break
    results = [(i, run_tool(n, a)) for i, n, a in calls]
    if wire == "responses":
        state = {"previous": got["id"], "history": [
            {"type": "function_call_output", "call_id": i, "output": r} for i, r in results]}
    else:
        state = {"previous": None, "history": history + [
            {"role": "assistant", "content": got["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": r}
                                         for i, r in results]}]}
    json.dump(state, open(session, "w"))
'''

PATHS = {"responses": "/v1/responses", "anthropic": "/v1/messages"}


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


@pytest.fixture
def agents() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:  # whatever a failed assertion left running
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def start(agents: list[subprocess.Popen[str]], url: str, wire: str, tmp_path: Path,
          pause: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", AGENT, url, wire, str(tmp_path / "session.json"),
         str(tmp_path / "CHANGELOG.md"), pause],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    agents.append(proc)
    return proc


@pytest.mark.parametrize("wire", ["responses", "anthropic"])
def test_a_restarted_agent_gets_the_same_reply_and_finishes(
        provider: FakeProvider, agents: list[subprocess.Popen[str]], tmp_path: Path,
        wire: str) -> None:
    provider.register("k", load_builtin()["changelog-fast"])
    url = provider.root_url("k") + PATHS[wire]
    first = start(agents, url, wire, tmp_path, "pause")
    assert first.stdout is not None
    before = [first.stdout.readline() for _ in range(2)]
    assert before[1] == "EFFECT\n", before
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(10)
    second = start(agents, url, wire, tmp_path, "go")
    out, _ = second.communicate(timeout=30)
    assert second.returncode == 0, out
    replies = [line for line in out.splitlines() if line.startswith("REPLY")]
    # The resent first request got the very same answer: same response id, same call ids.
    assert replies[0] == before[0].rstrip("\n")
    recs = provider.requests("k")
    assert {r.wire for r in recs} == {wire}
    assert [r.rule for r in recs] == ["start", "start", "run-tests", "report"]
    assert recs[0].messages == recs[1].messages
    assert recs[0].reply == recs[1].reply
    # Canonical records whatever the wire: the tool result is a chat `tool` message.
    assert [m["role"] for m in recs[2].messages if m["role"] != "system"] == [
        "user", "assistant", "tool"]
    # The naive agent did the effect twice: the fake neither hides nor causes that.
    assert (tmp_path / "CHANGELOG.md").read_text().count("修复登录超时") == 2
