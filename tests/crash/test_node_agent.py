"""A Node agent through the adapter door: its JavaScript probe client speaks the wire, its matrix
holds on named cases, and a copy that re-runs calls of unknown outcome is caught."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "node_agent"
CLIENT = ROOT / "clients" / "js" / "crashmatrix-probe.js"
CLI = [sys.executable, "-m", "crashmatrix"]
AGENT = "node_adapter:AGENT"
WINDOW = "changelog-fast/13:effect.after:append_note/kill"  # appended, result not yet saved
# Killed with the call's intent saved and its effect not yet done; and killed after the
# "unknown" result is saved, before the model hears it.
NAMED = (WINDOW, "changelog-fast/11:commit.after:started.append_note/kill",
         "changelog-fast/16:commit.after:message.tool/kill")

pytestmark = [
    pytest.mark.crash,
    # Never skipped in CI (`CI` set): there a missing node fails, so green proves the door works.
    pytest.mark.skipif(shutil.which("node") is None and not os.environ.get("CI"),
                       reason="node is not on PATH (CI installs the Debian package nodejs)"),
]


def crashmatrix(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # No bytecode: importing node_adapter must not leave __pycache__ in the source tree.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def _results(out: Path) -> dict[str, dict[str, Any]]:
    return {r["case"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}


def test_the_node_agent_holds_on_named_cases(tmp_path: Path) -> None:
    listed = crashmatrix("list", "--cases", "--scenario", "changelog-fast", "--agent", AGENT, cwd=EXAMPLE)
    assert listed.returncode == 0, listed.stderr
    assert set(NAMED) <= set(listed.stdout.split()), "the case ids this test names still exist"
    proc = crashmatrix("run", "--agent", AGENT, "--scenario", "changelog-fast", "--out",
                       str(tmp_path / "out"), "--json", cwd=EXAMPLE)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["failed"] == 0
    assert summary["failures"] == []
    assert summary["not_applicable"], "the store-bound invariants are said to be not judged"
    results = _results(tmp_path / "out")
    assert summary["cases"] == len(results) > 30
    for case in NAMED:
        r = results[case]
        assert r["verdict"] == "pass", r["violations"]
        step = int(case.split("/")[1].split(":")[0])
        assert r["crashed_at"][0] == step, "the first incarnation really was killed there"
        assert r["exit_codes"] == [None, 0, 0], "killed (no exit code), then recovered and settled"
        assert r["trace"][-1] == [], "the settle recovery found a finished session: no step at all"
    # Recovery told the model the outcome is unknown; it checked (read) instead of appending again.
    recovery = results[WINDOW]["trace"][1]
    assert "effect.before:read" in recovery
    assert "effect.before:append_note" not in recovery


def test_a_node_agent_that_reruns_unknown_calls_is_caught(tmp_path: Path) -> None:
    # The repository's layout, so agent.js finds ../../clients/js as it does in place.
    bad = tmp_path / "examples" / "node_agent"
    shutil.copytree(EXAMPLE, bad, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(CLIENT.parent, tmp_path / "clients" / "js")
    source = (bad / "agent.js").read_text()
    assert "if (started.has(c.id)) {" in source
    (bad / "agent.js").write_text(source.replace("if (started.has(c.id)) {", "if (false) {"))
    proc = crashmatrix("run", "--agent", AGENT, "--scenario", "changelog-fast", "--out",
                       str(tmp_path / "out"), "--json", cwd=bad)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr
    window = _results(tmp_path / "out")[WINDOW]
    assert window["verdict"] == "fail"
    # The re-run appends the line a second time, which the workspace shows without any store.
    assert "at-most-once" in {v["invariant"] for v in window["violations"]}
    assert window["crashed_at"][0] == 13


# The client on its own, against the wire of docs/probe-protocol.md: a tiny Node program probes
# three times and says how far it got; the test plays the harness on two pipes.
PROGRAM = """
const { probe, ProbeDetached } = require(process.argv[1]);
try {
  probe("commit.before", "message.user", { seq: 1 });
  probe("effect.after", "append_note", { call_id: "call_0" });
  probe("commit.after", "done");
  console.log("done");
} catch (err) {
  console.log(err instanceof ProbeDetached ? "detached" : `other ${err.message}`);
}
"""


def _drive(grant: bytes, *, close_events: bool = False, env: dict[str, str] | None = None,
           program: str = PROGRAM) -> tuple[str, list[dict[str, Any]]]:
    """Run PROGRAM with `grant` already in its permit pipe, then close the harness's ends."""
    permits_r, permits_w = os.pipe()
    events_r, events_w = os.pipe()
    os.write(permits_w, grant)
    os.close(permits_w)  # after the grant: end-of-file
    if close_events:
        os.close(events_r)  # the harness is gone before the first event: EPIPE on write
    probe_env = {"CRASHMATRIX_PROBE": f"fd:{permits_r},{events_w}"} if env is None else env
    proc = subprocess.run(["node", "-e", program, str(CLIENT)], pass_fds=(permits_r, events_w),
                          env={**os.environ, **probe_env}, capture_output=True, text=True,
                          timeout=30, check=False)
    os.close(permits_r)
    os.close(events_w)
    events: list[dict[str, Any]] = []
    if not close_events:
        with os.fdopen(events_r, "rb") as f:
            events = [json.loads(line) for line in f.read().splitlines()]
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip(), events


def test_the_js_client_speaks_the_wire() -> None:
    # Granted ahead: all three in one read.
    out, events = _drive(b"ccc")
    assert out == "done"
    assert [(e["kind"], e["label"], e["n"]) for e in events] == [
        ("commit.before", "message.user", 1), ("effect.after", "append_note", 2), ("commit.after", "done", 3)]
    assert events[0]["detail"] == {"seq": 1}
    assert "detail" not in events[2], "no detail given: none sent"
    assert len({e["pid"] for e in events}) == 1
    # Two permits: the third event is written, then end-of-file means the harness is gone.
    out, events = _drive(b"cc")
    assert (out, len(events)) == ("detached", 3)
    # Any byte but "c" means gone, too; a failed write (EPIPE) as well.
    assert _drive(b"cx")[0] == "detached"
    assert _drive(b"ccc", close_events=True)[0] == "detached"
    # No variable: a no-op, no I/O, no waiting.
    assert _drive(b"", env={"CRASHMATRIX_PROBE": ""}) == ("done", [])
    # Only the nine kinds, attached or not.
    bad_kind = PROGRAM.replace('"commit.after", "done"', '"commit.finished", "done"')
    assert _drive(b"ccc", program=bad_kind)[0].startswith("other unknown probe kind")
    assert _drive(b"", env={"CRASHMATRIX_PROBE": ""}, program=bad_kind)[0].startswith("other unknown")


def test_a_store_read_through_the_agents_own_dump_is_judged(tmp_path: Path) -> None:
    """`node_adapter:STORED` reads the Node agent's store with `agent.js dump` (the store-dump
    format): the invariants that read a store are judged, no reader written in Python."""
    out = tmp_path / "out"
    done = subprocess.run(
        [*CLI, "run", "--agent", "node_adapter:STORED", "--scenario", "changelog-fast", "--json",
         "--out", str(out), "--case", "changelog-fast/13:effect.after:append_note/kill"],
        cwd=EXAMPLE, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert "log-integrity" not in summary["not_applicable"], summary["not_applicable"]
    assert "durable-commits" not in summary["not_applicable"]
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["verdict"] for r in results} == {"pass"}
    assert len(results) == 2
