"""The agent: a Pydantic AI `Agent` with three plain function tools, made durable with DBOS.

Nothing here knows about crashmatrix. The model is `OpenAIChatModel` on the OpenAI provider,
which takes its server from `OPENAI_BASE_URL` (crashmatrix points it at its fake provider) and
speaks Chat Completions; the tools act on the current directory. `DBOSAgent` makes `agent.run`
a DBOS workflow whose model requests are DBOS steps, as the Pydantic AI docs show. A service
would construct `DBOS(config=...)`, call `DBOS.launch()` and then `await agent.run(message)`;
that is what crashmatrix's host does, with the system database in the case's session.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

OUTPUT_CAP = 16_000  # characters of a command's output the model is shown


def read(path: str) -> str:
    """Read a text file and return its contents.

    Args:
        path: The file to read, relative to the working directory.
    """
    return Path(path).read_text(encoding="utf-8")


def append_note(path: str, line: str) -> str:
    """Append one line to a text file (not idempotent: calling it twice appends twice).

    Args:
        path: The file to append to, relative to the working directory.
        line: The line to append.
    """
    with Path(path).open("a", encoding="utf-8") as f:
        f.write(line.rstrip("\n") + "\n")
    return f"appended 1 line to {path}"


def bash(command: str) -> str:
    """Run a shell command and return its exit code and output.

    Args:
        command: The command, run by /bin/sh in the working directory.
    """
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)
    return f"exit code {done.returncode}\n{(done.stdout + done.stderr)[-OUTPUT_CAP:]}"


model = OpenAIChatModel("gpt-4o-mini", provider=OpenAIProvider())
base = Agent(
    model,
    name="changelog",  # DBOS names the agent's workflow and steps after it
    instructions="You maintain CHANGELOG.md. Use the tools; check a file before appending again.",
    tools=[read, append_note, bash],
)
agent = DBOSAgent(base)
