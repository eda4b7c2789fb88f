"""The agent: instructions and three function tools, nothing that knows about crashmatrix.

Written as the OpenAI Agents SDK documents an agent: `Agent(name=..., instructions=...,
tools=[...])` with `@function_tool` functions. The model is the SDK's default client, which
takes its server from `OPENAI_BASE_URL` and speaks the Responses API; the tools act on the
current directory. A service would run it with
`Runner.run_sync(build(), message, session=SQLiteSession(user_id, "sessions.sqlite"))`; that is
what crashmatrix's host does, on the session it gives each case.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from agents import Agent, function_tool

OUTPUT_CAP = 16_000  # characters of a command's output the model is shown


@function_tool
def read(path: str) -> str:
    """Read a text file and return its contents.

    Args:
        path: The file to read, relative to the working directory.
    """
    return Path(path).read_text(encoding="utf-8")


@function_tool
def append_note(path: str, line: str) -> str:
    """Append one line to a text file (not idempotent: calling it twice appends twice).

    Args:
        path: The file to append to.
        line: The line to append, without a line break.
    """
    with Path(path).open("a", encoding="utf-8") as f:
        f.write(line.rstrip("\n") + "\n")
    return f"appended 1 line to {path}"


@function_tool
def bash(command: str) -> str:
    """Run a shell command and return its exit code and output.

    Args:
        command: The command line, run by /bin/sh.
    """
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)
    return f"exit code {done.returncode}\n{(done.stdout + done.stderr)[-OUTPUT_CAP:]}"


def build() -> Agent:
    """The agent: keeps CHANGELOG.md and runs the project's tests."""
    return Agent(
        name="changelog",
        instructions="You keep the project's CHANGELOG.md and run its tests. Use the tools; "
                     "report what you did.",
        model="gpt-4o-mini",
        tools=[read, append_note, bash],
    )
