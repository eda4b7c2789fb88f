"""A harness bug exits 3 (harness error) with a plain first line, never 1 ("violations found")."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from crashmatrix.harness.cli import list_cmd
from crashmatrix.harness.cli.main import main


def test_an_uncaught_error_is_exit_3_with_a_plain_message(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("boom in a table")

    monkeypatch.setattr(list_cmd, "tabulate", broken)
    result = CliRunner().invoke(main, ["list", "--agents"])
    assert result.exit_code == 3, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("crashmatrix: error: the harness failed (RuntimeError: boom in a table)")
    assert "Traceback" in result.output


def test_usage_errors_keep_their_code() -> None:
    assert CliRunner().invoke(main, ["list", "--no-such-option"]).exit_code == 2
