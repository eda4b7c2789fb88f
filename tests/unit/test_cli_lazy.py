"""Starting the command line (what `run` and `repro` start from) loads neither the commands it
does not name nor coverage.py (only --line-coverage uses it), nor the mutant catalogue (only an
`--agent mutant:NAME` uses it)."""

from __future__ import annotations

import subprocess
import sys

from crashmatrix.harness.cli.main import LAZY


def _python(code: str) -> str:
    """What `code` prints in a fresh interpreter (this one has imported everything already)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_each_lazy_command_loads_under_its_own_name() -> None:
    code = ("import click; from crashmatrix.harness.cli.main import LAZY, main; ctx = click.Context(main); "
            "print(sorted(n for n in LAZY if main.get_command(ctx, n).name != n))")
    assert _python(code) == "[]"


def test_starting_the_command_line_imports_none_of_them() -> None:
    modules = [module for module, _ in LAZY.values()] + ["crashmatrix.harness.mutants.catalogue",
                                                         "crashmatrix.harness.adapters.mutant"]
    code = ("import sys, crashmatrix.harness.cli.main; "
            f"print(sorted(m for m in {modules!r} + ['hypothesis', 'coverage'] if m in sys.modules))")
    assert _python(code) == "[]"
