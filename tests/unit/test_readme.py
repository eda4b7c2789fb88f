"""The README's set-up commands stay true: .ci/run runs the README's test command verbatim."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", section)


def test_setup_is_exactly_two_commands() -> None:
    main, tests = _commands()
    assert "crashmatrix run" in main
    assert "pytest" in tests


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    _, tests = _commands()
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert tests in ci
