"""Starts the durable agent with one mutant's patch applied (`python -m ...mutants.launch NAME ARGS`)."""

from __future__ import annotations

import sys

from crashmatrix.agent import cli
from crashmatrix.harness.mutants.catalogue import UnknownMutant, apply, get

EXIT_USAGE = 2


def main(args: list[str] | None = None) -> int:
    """ARGS[0] names the mutant; the rest are `durable-agent` arguments. Returns the exit code.

    In a forked incarnation this runs in the child only, so the zygote stays the correct agent.
    """
    argv = sys.argv[1:] if args is None else list(args)
    if not argv:
        print("usage: python -m crashmatrix.harness.mutants.launch MUTANT [durable-agent args...]",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        mutant = get(argv[0])
    except UnknownMutant as exc:
        print(f"crashmatrix.harness.mutants.launch: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    apply(mutant)
    return cli.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
