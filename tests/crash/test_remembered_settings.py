"""`recover` with nothing but the session: the settings `run` was given come from the session itself."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.agent_env import AGENT, make_paths
from tests.support.killer import run_and_kill
from tests.support.stub_provider import LINE, StubProvider, changelog_script

pytestmark = pytest.mark.crash
FIRST_COMMIT = "commit.after:run_started.prompt,message.user"  # the task saved; nothing done yet


def test_recover_given_only_the_session_finishes_the_run_in_the_remembered_workspace(tmp_path: Path) -> None:
    paths = make_paths(tmp_path / "case")
    elsewhere = tmp_path / "elsewhere"  # recover's working directory: no workspace of anyone's
    elsewhere.mkdir()
    with StubProvider(changelog_script) as stub:
        run_and_kill(paths, stub.url, "run", "append and test", at=FIRST_COMMIT)
        saved = json.loads((paths.session / "config.json").read_text())
        assert (saved["workspace"], saved["provider_url"]) == (str(paths.workspace), stub.url)
        # No workspace, no provider URL: both are the session's.
        proc = subprocess.run([*AGENT, "--session", str(paths.session), "--retry-delay", "0", "recover"],
                              capture_output=True, text=True, timeout=60, check=False, cwd=elsewhere)
        assert proc.returncode == 0, proc.stderr
        assert stub.requests, "the model was asked, at the remembered provider"
    assert (paths.workspace / "CHANGELOG.md").read_text(encoding="utf-8").count(LINE) == 1
    assert list(elsewhere.iterdir()) == []
    assert paths.entries()[-1]["type"] == "run_finished"
    assert paths.entries()[-1]["outcome"] == "completed"


def test_with_fsync_on_run_syncs_its_settings_file_then_renames_it_then_syncs_its_folder(
        tmp_path: Path) -> None:
    paths = make_paths(tmp_path / "case")
    trace = tmp_path / "trace"
    with StubProvider(changelog_script) as stub:
        argv = ["strace", "-f", "-qq", "-y", "-o", str(trace), "-e", "trace=fsync,rename", *AGENT,
                "--session", str(paths.session), "--workspace", str(paths.workspace),
                "--provider-url", stub.url, "--retry-delay", "0", "run", "append and test"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    calls = [line.split(" ", 1)[1].strip() for line in trace.read_text().splitlines()]
    renamed = next(i for i, c in enumerate(calls) if c.startswith("rename(") and "config.json" in c)
    # Its bytes synced before its name is; its name synced (the folder's fsync) right after.
    session = re.escape(str(paths.session))
    assert re.fullmatch(rf"fsync\(\d+<{session}/config\.tmp>\) = 0", calls[renamed - 1]), calls
    assert re.fullmatch(rf"fsync\(\d+<{session}>\) = 0", calls[renamed + 1]), calls
