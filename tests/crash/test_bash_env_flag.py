"""`durable-agent --bash-env clean` keeps the agent's secrets from bash, and is remembered."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.support.agent_env import cli_args, make_paths
from tests.support.stub_provider import StubProvider, answer, call, results, tool_calls


def _script(messages: list[dict[str, Any]]) -> dict[str, Any]:
    if not results(messages):
        return tool_calls(call("c1", "bash", command="env"))
    return answer("done")


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPENAI_API_KEY": "secret-xyz-123"}
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False, env=env)


def _bash_output(stub: StubProvider) -> str:
    return results(stub.requests[-1])["c1"]


def test_clean_bash_env_is_used_and_remembered(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(_script) as stub:
        first = _run(cli_args(paths, stub.url, "--bash-env", "clean", "run", "show env"))
        assert first.returncode == 0, first.stderr
        assert "secret-xyz-123" not in _bash_output(stub)
        assert json.loads((paths.session / "config.json").read_text())["bash_env"] == "clean"
        second = _run(cli_args(paths, stub.url, "run", "show env again"))
        assert second.returncode == 0, second.stderr
        assert "secret-xyz-123" not in _bash_output(stub)  # remembered, not reset to inherit


def test_by_default_bash_inherits_the_environment(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    with StubProvider(_script) as stub:
        proc = _run(cli_args(paths, stub.url, "run", "show env"))
        assert proc.returncode == 0, proc.stderr
        assert "secret-xyz-123" in _bash_output(stub)
