"""The CLI's exit codes (README, "Using it")."""

from enum import IntEnum


class Exit(IntEnum):
    HELD = 0  # every invariant held
    VIOLATIONS = 1  # at least one case violated an invariant (or was nondeterministic)
    USAGE = 2  # bad input: unknown scenario, malformed option, damaged file
    HARNESS = 3  # the harness itself failed, or was interrupted
