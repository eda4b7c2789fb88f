"""OpenAI Agents SDK (JS) apps hosted unmodified: `crashmatrix run --agent openai-agents-js`.

`adapter` tells the harness how to start and restart the host; `host.mjs` is the Node program it
runs (loads the user's agent factory and session from the user's project, installs the seams,
runs the agent as the SDK documents); `store` reads the session through the host's `dump`
command (the SDK's own `getItems`), so any session the app brings can be judged.
"""
