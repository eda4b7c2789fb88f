"""Entry point for `python -m agent`."""

from crashmatrix.agent.cli import main

raise SystemExit(main())
