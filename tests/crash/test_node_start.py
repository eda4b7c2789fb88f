"""Node hosts read their session before loading the framework: a recover with nothing to resume
ends without importing the app, with the events, exit code, output and session bytes the
framework's path gives (`CRASHMATRIX_NODE_CHECK_FIRST=0`); one with a run open loads it as before.

Whether the framework was loaded is seen from the app itself, never from timing: each test hosts
a copy of the example (re-exporting it, in a folder whose node_modules is the example's) that
appends a line to a file every time it is imported.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crashmatrix.fakes import FakeProvider
from crashmatrix.harness.adapters.interface import LaunchSpec
from crashmatrix.harness.execution.incarnation import Incarnation
from crashmatrix.harness.execution.spawn import Launch
from crashmatrix.harness.records.events import ProbeEvent
from crashmatrix.integrations.langgraph_js.adapter import ADAPTER as LANGGRAPH_JS
from crashmatrix.integrations.node_hosting import CHECK_FIRST_ENV, NodeHostedAdapter
from crashmatrix.integrations.openai_agents_js.adapter import ADAPTER as AGENTS_JS
from crashmatrix.integrations.openai_agents_js.adapter import DEFAULT_SESSION, SESSION_ENV
from crashmatrix.scenarios import load_builtin
from tests.support import node_apps
from tests.support.frameworks import ROOT

pytestmark = pytest.mark.crash
SCENARIO = load_builtin()["changelog-fast"]
LOADED = "CRASHMATRIX_TEST_APP_LOADED"  # the file the app copy appends a line to when imported
DEADLINE_S = 60.0

Ended = tuple[int | None, list[ProbeEvent], str]  # exit code (None: killed), events, output
Kill = Callable[[list[ProbeEvent]], bool]


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider() as p:
        yield p


@dataclasses.dataclass
class Hosted:
    adapter: NodeHostedAdapter
    env: dict[str, str]
    loaded: Path
    root: Path

    def loads(self) -> int:
        """How many times the app has been imported."""
        return len(self.loaded.read_text().splitlines()) if self.loaded.exists() else 0

    def case(self, name: str) -> Path:
        where = self.root / name
        (where / "ws").mkdir(parents=True)
        for rel, text in SCENARIO.workspace.items():
            (where / "ws" / rel).parent.mkdir(parents=True, exist_ok=True)
            (where / "ws" / rel).write_text(text, encoding="utf-8")
        return where

    def run(self, where: Path, url: str, kill: Kill | None = None, **env: str) -> Ended:
        return self._incarnate(self.adapter.start_args(_spec(where, url), SCENARIO.task), where, kill, env)

    def recover(self, where: Path, url: str, kill: Kill | None = None, **env: str) -> Ended:
        return self._incarnate(self.adapter.recover_args(_spec(where, url)), where, kill, env)

    def _incarnate(self, args: list[str], where: Path, kill: Kill | None, env: dict[str, str]) -> Ended:
        log = where / f"inc{len(list(where.glob('inc*.log'))) + 1}.log"
        launch = Launch(program=self.adapter.program, entry=None, args=args, cwd=where,
                        env={**self.env, **env}, output=log)
        deadline = time.monotonic() + DEADLINE_S
        events: list[ProbeEvent] = []
        code: int | None = None
        with Incarnation(launch) as inc:
            while (event := inc.next_event(deadline)) is not None:
                events.append(event)
                if kill is not None and kill(events):
                    inc.kill()
                    break
                inc.ack()
            else:
                code = inc.wait(deadline)
        return code, events, log.read_text(encoding="utf-8")


def _spec(where: Path, url: str) -> LaunchSpec:
    return LaunchSpec(session=where / "session", workspace=where / "ws", provider_url=url,
                      tools=list(SCENARIO.tools.enabled), policies={}, resume_budget=3, max_retries=0,
                      retry_delay_s=0.0, provider_timeout_s=30.0, fsync=False)


def hosted(adapter: NodeHostedAdapter, example: Path, module: str, exports: str, tmp: Path) -> Hosted:
    """The adapter hosting a copy of the example that notes each import of itself."""
    folder = tmp / "app"
    folder.mkdir()
    (folder / "node_modules").symlink_to(example / "node_modules")
    (folder / "app.mjs").write_text(
        'import { appendFileSync } from "node:fs";\n'
        f'appendFileSync(process.env.{LOADED}, "loaded\\n");\n'
        f"export {{ {exports} }} from {json.dumps(str(example / module))};\n", encoding="utf-8")
    app = adapter.with_app(f"{folder / 'app.mjs'}:build")
    # PATH as the runner gives it: the scenario's commands say `python`, this interpreter.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {"PATH": path, "HOME": os.environ.get("HOME", str(tmp)),
           **app.env(), LOADED: str(tmp / "loaded.txt")}
    return Hosted(app, env, tmp / "loaded.txt", tmp)


def copied(where: Path, name: str) -> Path:
    target = where.parent / name
    shutil.copytree(where, target, symlinks=True, ignore=shutil.ignore_patterns("inc*.log"))
    return target


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def after_final_reply(point: str) -> Kill:
    """Kill at the first `point` after the model's final answer (a reply with no tool call)."""
    def kill(events: list[ProbeEvent]) -> bool:
        answered = any(e.point == "provider.after:reply" and e.detail.get("tool_calls") == 0 for e in events)
        return answered and events[-1].point == point
    return kill


def at(point: str) -> Kill:
    return lambda events: events[-1].point == point


def points(events: list[ProbeEvent]) -> list[tuple[str, dict[str, object]]]:
    return [(e.point, e.detail) for e in events]


def assert_nothing_to_resume_is_checked_first(app: Hosted, provider: FakeProvider, done: Path, key: str,
                                              url: str) -> None:
    """A recover of `done` ends without importing the app, as the framework's path ends it."""
    fast, full = copied(done, "fast"), copied(done, "full")
    asked, loads = len(provider.requests(key)), app.loads()
    checked = app.recover(fast, url)
    assert app.loads() == loads, "checked first: the app (and its framework) was not imported"
    loaded = app.recover(full, url, **{CHECK_FIRST_ENV: "0"})
    assert app.loads() == loads + 1, "switched off: the app was imported"
    assert checked == loaded == (0, [], ""), (checked, loaded)  # no event, exit 0, nothing printed
    assert files(fast) == files(full), "the session and workspace left byte for byte alike"
    assert len(provider.requests(key)) == asked, "no request"


@pytest.fixture(scope="module")
def langgraph_js_example() -> Path:
    return node_apps.ready(ROOT / "examples" / "langgraph_js_app")


@pytest.fixture(scope="module")
def agents_js_example() -> Path:
    return node_apps.ready(ROOT / "examples" / "openai_agents_js_app")


def test_langgraph_js_settles_without_the_framework(langgraph_js_example: Path, provider: FakeProvider,
                                                    tmp_path: Path) -> None:
    app = hosted(LANGGRAPH_JS, langgraph_js_example, "graph.mjs", "build", tmp_path)
    url = provider.register("done", SCENARIO)
    done = app.case("done")
    # Killed at its last event: the final checkpoint written, the database left unclosed (its
    # WAL not yet checkpointed), as a crash there leaves it for the recovery.
    code, events, _ = app.run(done, url, kill=after_final_reply("commit.after:checkpoint.loop"))
    assert code is None, "killed at the final checkpoint"
    assert events[-1].point == "commit.after:checkpoint.loop"
    assert (done / "session" / "checkpoints.sqlite-wal").exists(), "its commits still in the WAL"
    assert_nothing_to_resume_is_checked_first(app, provider, done, "done", url)


def test_langgraph_js_loads_the_framework_for_an_open_run(langgraph_js_example: Path,
                                                          provider: FakeProvider, tmp_path: Path) -> None:
    app = hosted(LANGGRAPH_JS, langgraph_js_example, "graph.mjs", "build", tmp_path)
    url = provider.register("open", SCENARIO)
    opened = app.case("open")
    code, _, _ = app.run(opened, url, kill=at("effect.after:append_note"))
    assert code is None
    ended = {}
    for check in ("1", "0"):  # the same run, checked first and not, each with its own fake
        key = f"open-{check}"
        where = copied(opened, key)
        loads = app.loads()
        ended[check] = app.recover(where, provider.register(key, SCENARIO, provider.state("open")),
                                   **{CHECK_FIRST_ENV: check})
        assert app.loads() == loads + 1, "a run to resume: the framework was loaded"
    (code_on, events_on, out_on), (code_off, events_off, out_off) = ended["1"], ended["0"]
    assert code_on == code_off == 0
    assert out_on == out_off == ""
    assert "effect.before:append_note" in [e.point for e in events_on], "the run was resumed"
    assert points(events_on) == points(events_off)


def test_agents_js_settles_and_dumps_without_the_sdk(agents_js_example: Path, provider: FakeProvider,
                                                     tmp_path: Path) -> None:
    app = hosted(AGENTS_JS, agents_js_example, "agent.mjs", "build, openSession", tmp_path)
    app.env[SESSION_ENV] = DEFAULT_SESSION  # the example's session module, as its adapter names it
    url = provider.register("done", SCENARIO)
    done = app.case("done")
    code, events, _ = app.run(done, url, kill=lambda events: events[-1].kind == "commit.after")
    assert code is None, "killed once the run was saved"
    assert events[-1].detail == {"seq": 1}
    assert_nothing_to_resume_is_checked_first(app, provider, done, "done", url)
    # The store reader's dump: the same items, the SDK not loaded.
    dump = [*app.adapter.program, "--app", app.adapter.app, "dump", str(done / "session")]
    loads = app.loads()
    checked = subprocess.run(dump, env=app.env, capture_output=True, text=True, timeout=DEADLINE_S,
                             check=True)
    assert app.loads() == loads
    loaded = subprocess.run(dump, env={**app.env, CHECK_FIRST_ENV: "0"}, capture_output=True, text=True,
                            timeout=DEADLINE_S, check=True)
    assert app.loads() == loads + 1
    assert checked.stdout == loaded.stdout
    assert json.loads(checked.stdout)["items"]


def test_agents_js_loads_the_sdk_for_an_unanswered_input(agents_js_example: Path, provider: FakeProvider,
                                                         tmp_path: Path) -> None:
    app = hosted(AGENTS_JS, agents_js_example, "agent.mjs", "build, openSession", tmp_path)
    app.env[SESSION_ENV] = DEFAULT_SESSION
    ended = {}
    for check in ("1", "0"):
        where = app.case(f"open-{check}")
        # The input saved, no answer: the SDK saves a run whole, so an app's own session does this.
        (where / "session").mkdir()
        saved = [{"role": "user", "content": SCENARIO.task}]
        (where / "session" / "session.json").write_text(json.dumps(saved), encoding="utf-8")
        loads = app.loads()
        url = provider.register(f"open-{check}", SCENARIO)
        ended[check] = app.recover(where, url, **{CHECK_FIRST_ENV: check})
        assert app.loads() == loads + 1, "an input to run: the SDK was loaded"
    (code_on, events_on, out_on), (code_off, events_off, out_off) = ended["1"], ended["0"]
    assert code_on == code_off == 0
    assert out_on == out_off == ""
    assert [e.point for e in events_on[:1]] == ["provider.before:chat"], "the input was run again"
    assert points(events_on) == points(events_off)
