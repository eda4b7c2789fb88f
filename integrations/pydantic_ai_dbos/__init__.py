"""Pydantic AI + DBOS apps hosted unmodified: `crashmatrix run --agent pydantic-ai-dbos`.

The extra: `crashmatrix[pydantic-ai-dbos]`.

`adapter` tells the harness how to start and restart the host; `host` is the program it runs
(imports the user's `DBOSAgent`, installs the seams, constructs and launches DBOS on a SQLite
system database in the session, runs the agent's workflow, and after a crash launches DBOS again,
which recovers it); `seams` turns tool calls, model requests and DBOS's workflow writes into
probe events; `store` reads DBOS's system database into commits and the canonical transcript.
"""
