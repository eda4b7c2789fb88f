"""The messages-only baseline's adapter: `crashmatrix run --agent messages-only`.

The agent (`crashmatrix.agent.messages_only`) saves its chat history and nothing else; a matrix
against it shows what durability adds. Its store is read into the canonical transcript as one
run, completed once a final answer is saved, so every invariant is judged.
"""

from __future__ import annotations

import json

from crashmatrix.agent import __version__
from crashmatrix.agent.messages_only import LOG
from crashmatrix.harness.adapters.interface import (
    Capability,
    LaunchSpec,
    PythonEntry,
    ToolSpec,
    python_program,
)
from crashmatrix.harness.adapters.tools import reference_tools
from crashmatrix.harness.records.profile import Profile
from crashmatrix.harness.records.transcript import Message, Run, Transcript, calls_of

MODULE = "crashmatrix.agent.messages_only"
RUN_ID = "run-1"  # the baseline has no runs of its own: its whole history is one


class MessagesOnlyAdapter:
    name = "messages-only"
    program = python_program(MODULE)
    python: PythonEntry | None = PythonEntry(MODULE, f"{MODULE}:main", (MODULE,),
                                                     coverage_source=MODULE)
    # No lock: a second process on its session is let in, and the matrix shows it. Its store is
    # one file in the session directory: power loss and black-box crash points apply.
    capabilities = frozenset({Capability.KILL, Capability.STORE, Capability.CONCURRENT,
                              Capability.FILE_STORE, Capability.STATE_IN_TREE})

    def start_args(self, spec: LaunchSpec, task: str) -> list[str]:
        return ["run", *self._where(spec), task]

    def recover_args(self, spec: LaunchSpec) -> list[str]:
        return ["recover", *self._where(spec)]

    def _where(self, spec: LaunchSpec) -> list[str]:
        return [str(spec.session), str(spec.workspace), spec.provider_url, ",".join(spec.tools)]

    def env(self) -> dict[str, str]:
        return {}

    def declared_tools(self) -> tuple[ToolSpec, ...]:
        return reference_tools()  # the reference agent's tools, whatever it does with them

    def profile(self) -> Profile:
        return Profile("messages-only baseline (crashmatrix)", f"crashmatrix {__version__}",
                       "the chat history only (what most agents save)",
                       "replay the messages and ask the model again")

    def declared_branches(self) -> tuple[str, ...]:
        return ()

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        path = spec.session / LOG
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        t = Transcript()
        for seq, line in enumerate(lines, 1):
            try:
                m = json.loads(line)
            except ValueError:
                t.integrity_error = f"{LOG} line {seq}: not JSON"
                return t
            t.messages.append(_message(seq, m))
            t.labels[seq] = str(m["role"])  # the label its commit probes report (`save`)
        t.commits = len(t.messages)
        if t.messages:
            last = t.messages[-1]
            done = last.role == "assistant" and not last.calls
            t.runs = [Run(RUN_ID, 1, "prompt", outcome="completed" if done else None,
                          finished_seq=last.seq if done else None)]
        return t


def _message(seq: int, m: dict[str, object]) -> Message:
    calls = calls_of(m.get("tool_calls"))
    content = m.get("content")
    return Message(seq=seq, msg_id=f"m{seq}", run_id=RUN_ID, role=str(m["role"]),
                   content=None if content is None else str(content), calls=calls,
                   call_id=str(m["tool_call_id"]) if m.get("tool_call_id") else None,
                   is_error=str(content or "").startswith("ERROR: "))


ADAPTER = MessagesOnlyAdapter()
