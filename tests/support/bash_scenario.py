"""A scenario whose agent runs one bash command (the case's subject: what it leaves, what it fills),
then appends a line to CHANGELOG.md once, checking when unsure: the running example around a tool."""

from __future__ import annotations

SCENARIO = '''
description = "the agent's tool leaves {what}"
task = "Prepare the workspace, then append 'x' to CHANGELOG.md."

[workspace]
"CHANGELOG.md" = "# Changelog\\n\\n"

[tools]
enabled = ["read", "append_note", "bash"]

[[script]]
name = "prepare"
when = {{ turns = 0 }}
reply.tool_calls = [{{ tool = "bash", args = {{ command = "{command}" }} }}]

[[script]]
name = "append"
when = {{ last_turn = {{ bash = ["ok", "error", "unknown"] }} }}
reply.tool_calls = [{{ tool = "append_note", args = {{ path = "CHANGELOG.md", line = "x" }} }}]

[[script]]
name = "check"
when = {{ last_turn = {{ append_note = "unknown" }} }}
reply.tool_calls = [{{ tool = "read", args = {{ path = "CHANGELOG.md" }} }}]

[[script]]
name = "append-if-missing"
when = {{ last_turn = {{ "read:CHANGELOG.md" = "ok" }}, lacks = {{ "read:CHANGELOG.md" = "x" }} }}
reply.tool_calls = [{{ tool = "append_note", args = {{ path = "CHANGELOG.md", line = "x" }} }}]

[[script]]
name = "reread"
when = {{ last_turn = {{ "read:CHANGELOG.md" = ["unknown", "error"] }} }}
reply.tool_calls = [{{ tool = "read", args = {{ path = "CHANGELOG.md" }} }}]

[[script]]
name = "done"
when = {{ min_turns = 1 }}
reply.final = "done"

[expect]
outcome = "completed"

[[expect.lines]]
path = "CHANGELOG.md"
line = "x"
count = 1
'''


def bash_then_append(what: str, command: str) -> str:
    """The scenario's TOML: `what` the tool does, in its description; `command`, TOML-escaped."""
    return SCENARIO.format(what=what, command=command.replace("\\", "\\\\").replace('"', '\\"'))
