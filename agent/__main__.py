"""Entry point for `python -m agent`."""

from agent.cli import main

raise SystemExit(main())
