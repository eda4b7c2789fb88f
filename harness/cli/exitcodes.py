"""The CLI's exit codes (README, "Using it"), and the one way a command stops on an error."""

import sys
from enum import IntEnum
from typing import NoReturn

import click


class Exit(IntEnum):
    HELD = 0  # every invariant held
    VIOLATIONS = 1  # at least one case violated an invariant (or was nondeterministic)
    USAGE = 2  # bad input: unknown scenario, malformed option, damaged file
    HARNESS = 3  # the harness itself failed, or was interrupted


def fail(message: str, code: Exit = Exit.USAGE) -> NoReturn:
    """Print `crashmatrix: error: MESSAGE` on stderr and exit with `code`."""
    click.echo(f"crashmatrix: error: {message}", err=True)
    sys.exit(int(code))
