"""The workflow: one agent with three function tools, checkpointed after every superstep.

Nothing here knows about crashmatrix. The agent is an Agent Framework `Agent` on the
framework's Chat Completions client (`OpenAIChatCompletionClient`, which takes its server from
`OPENAI_BASE_URL`)
with `@tool` functions acting on the current directory, run as the start executor of a
`WorkflowBuilder` workflow. `build(checkpoint_storage)` is the factory the host calls, as an app
would build its workflow with its own `FileCheckpointStorage`; the workflow has a stable name, so
a restarted process finds its checkpoints (`storage.get_latest(workflow_name=...)`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Annotated, Any

from agent_framework import Agent, CheckpointStorage, Workflow, WorkflowBuilder, tool
from agent_framework.openai import OpenAIChatCompletionClient

OUTPUT_CAP = 16_000  # characters of a command's output the model is shown
NAME = "changelog"


@tool
def read(path: Annotated[str, "The file to read, relative to the working directory."]) -> str:
    """Read a text file and return its contents."""
    return Path(path).read_text(encoding="utf-8")


@tool
def append_note(path: Annotated[str, "The file to append to."],
                line: Annotated[str, "The line to append, without a line break."]) -> str:
    """Append one line to a text file (not idempotent: calling it twice appends twice)."""
    with Path(path).open("a", encoding="utf-8") as f:
        f.write(line.rstrip("\n") + "\n")
    return f"appended 1 line to {path}"


@tool
def bash(command: Annotated[str, "The command line, run by /bin/sh."]) -> str:
    """Run a shell command and return its exit code and output."""
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)
    return f"exit code {done.returncode}\n{(done.stdout + done.stderr)[-OUTPUT_CAP:]}"


TOOLS: list[Any] = [read, append_note, bash]


def build(checkpoint_storage: CheckpointStorage | None = None) -> Workflow:
    """The workflow: the agent as its start executor, with the given checkpoint storage."""
    agent = Agent(
        client=OpenAIChatCompletionClient(model="gpt-4o-mini"),
        name=NAME,
        instructions="You keep the project's CHANGELOG.md and run its tests. Use the tools; "
                     "report what you did.",
        tools=TOOLS,
    )
    return WorkflowBuilder(name=NAME, start_executor=agent, checkpoint_storage=checkpoint_storage).build()
