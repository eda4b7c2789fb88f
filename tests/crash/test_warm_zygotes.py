"""A hosted app's tools are described by a child of the zygote its run then forks from (the framework
imported once a command), with the same answers and errors as a fresh interpreter gives, and no
zygote outlives the command."""

from __future__ import annotations

import contextvars
import importlib.util
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from crashmatrix.harness.adapters.interface import PreflightError
from crashmatrix.harness.api import run_matrix
from crashmatrix.harness.execution import warm_zygotes
from crashmatrix.harness.execution.spawn import SpawnMode
from crashmatrix.harness.execution.spawners import make_spawner
from crashmatrix.harness.execution.zygote import Zygote
from crashmatrix.integrations import hosting
from crashmatrix.integrations.agent_framework.adapter import ADAPTER
from tests.support.frameworks import CLI

pytestmark = [
    pytest.mark.crash,
    # Skipped where the extra is not installed; never in CI (`CI` set), where that fails.
    pytest.mark.skipif(importlib.util.find_spec("agent_framework") is None and not os.environ.get("CI"),
                       reason="the Microsoft Agent Framework is not installed "
                              "(pip install -e '.[microsoft-agent-framework]')"),
]


def zygotes() -> list[int]:
    """This process's zygote children."""
    return [p.pid for p in psutil.Process().children()
            if "crashmatrix.harness.execution.zygote_server" in " ".join(p.cmdline())]


def test_the_run_forks_from_the_zygote_that_described_the_app() -> None:
    fresh = ADAPTER.with_app(ADAPTER.app)  # its own cache of described tools
    expected = ADAPTER.with_app(ADAPTER.app).declared_tools()  # outside `kept`: a fresh interpreter
    assert zygotes() == []
    preload = list(fresh.python.preload) if fresh.python else []
    with warm_zygotes.kept():
        assert fresh.declared_tools() == expected
        [started] = zygotes()
        spawner = make_spawner(SpawnMode.FORK, preload)
        assert isinstance(spawner, Zygote)
        assert zygotes() == [started], "the run's zygote is the one that described the app"
        spawner.close()
    assert zygotes() == []


def test_what_is_not_taken_is_closed_and_nothing_is_warmed_outside_a_command() -> None:
    with warm_zygotes.kept():
        ADAPTER.with_app(ADAPTER.app).declared_tools()
        assert len(zygotes()) == 1
        fresh = make_spawner(SpawnMode.FRESH, list(ADAPTER.python.preload) if ADAPTER.python else [])
        fresh.close()
    assert zygotes() == [], "a --spawn fresh run leaves the zygote that described the app"
    ADAPTER.with_app(ADAPTER.app).declared_tools()  # outside `kept`: a fresh interpreter
    assert zygotes() == []
    off_main: list[int] = []
    with warm_zygotes.kept():
        # The command's context copied into the thread, so only the main-thread rule stops it.
        context = contextvars.copy_context()
        worker = threading.Thread(target=lambda: context.run(
            lambda: (ADAPTER.with_app(ADAPTER.app).declared_tools(), off_main.extend(zygotes()))))
        worker.start()
        worker.join()
    assert off_main == [], "a zygote dies with the thread that started it: only the main thread warms"


def test_an_app_that_does_not_import_is_refused_with_its_traceback_from_the_zygote_too() -> None:
    with warm_zygotes.kept():
        with pytest.raises(PreflightError) as caught:
            ADAPTER.with_app("nosuchmod:build").declared_tools()
        assert len(zygotes()) == 1, "described by the zygote's child"
    message = str(caught.value)
    assert "describe exited 1" in message, message
    assert "ModuleNotFoundError: No module named 'nosuchmod'" in message


def test_a_preload_that_does_not_import_falls_back_to_the_fresh_describe() -> None:
    # A broken install of the framework is the user's to see, with its traceback (exit 2), never
    # a zygote error of the harness's: the adapter's own interpreter describes, and no zygote is
    # kept for the run.
    broken = type("Broken", (type(ADAPTER),), {"preload": ("no_such_framework_module",)})()
    expected = ADAPTER.with_app(ADAPTER.app).declared_tools()
    with warm_zygotes.kept():
        assert broken.declared_tools() == expected
        assert zygotes() == []


def test_a_describe_past_its_deadline_is_killed_reaped_and_named(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "slowapp.py").write_text("import time\n\ndef build():\n    time.sleep(60)\n",
                                         encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # a user's app is found from where crashmatrix runs
    monkeypatch.setattr(hosting, "DESCRIBE_TIMEOUT_S", 3.0)
    with warm_zygotes.kept():
        with pytest.raises(PreflightError, match="took more than 3 s") as caught:
            ADAPTER.with_app("slowapp:build").declared_tools()
        [zygote] = zygotes()
        assert psutil.Process(zygote).children() == [], "the describe child was reaped"
    assert "slowapp:build" in str(caught.value)


def test_a_run_and_a_repro_exec_one_zygote_and_no_interpreter_to_describe(tmp_path: Path) -> None:
    # Every program each command and its children exec, from strace: one zygote, which described
    # the app and then forked every incarnation, and no `describe` or host interpreter. (That a
    # fresh-spawning run closes the zygote unused is the test above, in this process.)
    strace = shutil.which("strace")
    if strace is None and not os.environ.get("CI"):
        pytest.skip("strace is not installed (apt-get install strace; .ci/run installs it)")
    assert strace is not None, "strace is required in CI"
    case = "changelog-fast/07:effect.after:append_note/kill"
    for command in (["run", "--scenario", "changelog-fast", "--case", case, "--out", str(tmp_path / "out")],
                    ["repro", case]):
        log = tmp_path / f"{command[0]}.log"
        done = subprocess.run([strace, "-f", "-qq", "-s", "256", "-e", "trace=execve", "-e", "signal=none",
                               "-o", str(log), *CLI, *command, "--agent", ADAPTER.name],
                              cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode in (0, 1), done.stderr[-3000:]
        execs = [line for line in log.read_text(encoding="utf-8").splitlines() if "execve(" in line
                 and "= 0" in line]
        assert sum("zygote_server" in line for line in execs) == 1, (command[0], execs)
        assert [line for line in execs if '"describe"' in line or f'"{ADAPTER.host}"' in line] == []
    results = (tmp_path / "out" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(results) == 2  # the recording and the case


def test_run_matrix_describes_with_the_zygote_its_matrix_forks_from(monkeypatch: pytest.MonkeyPatch) -> None:
    # A user's test calling the API (or the pytest plugin's crashmatrix_run fixture) starts the
    # framework once too: one zygote, for the describe and every incarnation, and no describe
    # interpreter of its own.
    started: list[list[str]] = []
    start = Zygote.__init__

    def counted(self: Zygote, preload: list[str], *args: Any, **kwargs: Any) -> None:
        started.append(preload)
        start(self, preload, *args, **kwargs)

    fresh: list[list[str]] = []
    run = subprocess.run

    def watched(command: list[str], *args: Any, **kwargs: Any) -> Any:
        fresh.append(list(command))
        return run(command, *args, **kwargs)

    monkeypatch.setattr(Zygote, "__init__", counted)
    monkeypatch.setattr(hosting.subprocess, "run", watched)
    case = "changelog-fast/07:effect.after:append_note/kill"
    results = run_matrix(agent=ADAPTER.name, scenarios=["changelog-fast"], cases=[case])
    assert {r.case for r in results} == {"changelog-fast/none", case}
    assert len(started) == 1, started
    assert [c for c in fresh if "describe" in c] == []
    assert zygotes() == []
