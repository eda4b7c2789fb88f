"""Agents SDK apps hosted unmodified: `crashmatrix run --agent openai-agents` (`crashmatrix[openai-agents]`).

`adapter` tells the harness how to start and restart the host; `host` is the program it runs
(imports the user's agent factory, installs the seams, runs the agent with `Runner.run_sync` on a
file-backed `SQLiteSession`, and re-runs it on the same session after a crash); `seams` turns the
SDK's run hooks, model calls and session writes into probe events; `store` reads the session's
items into commits and the canonical transcript.
"""
