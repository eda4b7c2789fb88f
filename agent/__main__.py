"""Entry point for `python -m crashmatrix.agent`."""

from crashmatrix.agent.cli import main

raise SystemExit(main())
