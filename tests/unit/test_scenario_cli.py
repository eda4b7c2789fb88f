"""`crashmatrix fake-provider`: usage errors exit 2; the live server answers, stops on SIGINT."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema
from click.testing import CliRunner

from crashmatrix.harness.cli.main import main
from crashmatrix.scenarios.loader import builtin_dir

ROOT = Path(__file__).resolve().parents[2]


def test_unknown_scenario_exits_2_with_a_message() -> None:
    result = CliRunner().invoke(main, ["fake-provider", "--scenario", "nope"])
    assert result.exit_code == 2
    assert "unknown scenario 'nope'; known: " in result.output
    assert "Traceback" not in result.output


def test_malformed_scenario_file_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('task = "t"\n[[script]]\nreply.final = 3\n')
    result = CliRunner().invoke(main, ["fake-provider", "--scenario", "bad",
                                       "--scenarios", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{tmp_path / 'bad.toml'}:3: field 'script[0].reply.final': expected a string" in (
        result.output)
    assert "Traceback" not in result.output


def test_help_names_the_tool() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "crashmatrix: crash-test durable agent loops" in result.output
    assert "fake-provider" in result.output


def test_live_server_answers_and_exits_0_on_sigint() -> None:
    env = dict(os.environ)
    proc = subprocess.Popen(
        [sys.executable, "-m", "crashmatrix",
         "fake-provider", "--scenario", "changelog"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        parts = urlsplit(url)
        assert (parts.hostname, parts.path) == ("127.0.0.1", "/default/v1")
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
        body = {"model": "m", "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "Append the line to CHANGELOG.md and run the tests."}]}
        conn.request("POST", parts.path + "/chat/completions", body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        reply = json.loads(resp.read())
        conn.close()
        assert resp.status == 200
        (call,) = reply["choices"][0]["message"]["tool_calls"]
        assert call["function"]["name"] == "append_note"
        assert json.loads(call["function"]["arguments"]) == {"path": "CHANGELOG.md",
                                                             "line": "修复登录超时"}
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_the_schema_command_prints_a_schema_that_judges_scenario_files() -> None:
    result = CliRunner().invoke(main, ["schema"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    validator = jsonschema.Draft202012Validator(schema)
    builtins = sorted(builtin_dir().glob("*.toml"))
    assert len(builtins) >= 15
    for path in builtins:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        assert list(validator.iter_errors(data)) == [], path.name
        typo = {**data, "descripton": "typo'd key"}
        assert [e.validator for e in validator.iter_errors(typo)] == ["additionalProperties"], path.name
