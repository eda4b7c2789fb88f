"""A `run` or `repro` loads neither the commands it does not use nor coverage.py (--line-coverage does)."""

from __future__ import annotations

import subprocess
import sys

import click

from crashmatrix.harness.cli.main import LAZY, main


def test_each_lazy_command_loads_under_its_own_name() -> None:
    ctx = click.Context(main)
    for name in LAZY:
        command = main.get_command(ctx, name)
        assert command is not None
        assert command.name == name
    assert set(LAZY) <= set(main.list_commands(ctx))


def test_starting_the_command_line_imports_none_of_them() -> None:
    modules = [module for module, _ in LAZY.values()]
    code = ("import sys, crashmatrix.harness.cli.main; "
            f"print(sorted(m for m in {modules!r} + ['hypothesis', 'coverage'] if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"
