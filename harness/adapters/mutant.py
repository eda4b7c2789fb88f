"""The adapter for a mutant: our durable agent's adapter, started through the mutant launcher."""

from __future__ import annotations

from crashmatrix.harness.adapters.durable import ENTRY, DurableAgentAdapter
from crashmatrix.harness.adapters.interface import LaunchSpec, PythonEntry, ToolSpec, python_program
from crashmatrix.harness.adapters.tools import reference_tools
from crashmatrix.harness.mutants.catalogue import MutantName
from crashmatrix.harness.records.transcript import Transcript


class MutantAdapter:
    """Everything as for the durable agent (store, inbox, branches), except how it is started."""

    # The zygote imports the catalogue once; each forked child applies its own mutant's patch.
    python: PythonEntry | None = PythonEntry(
        "crashmatrix.harness.mutants.launch", "crashmatrix.harness.mutants.launch:main",
        (*ENTRY.preload, "crashmatrix.harness.mutants.launch"), coverage_source=ENTRY.coverage_source)
    program = python_program("crashmatrix.harness.mutants.launch")

    def __init__(self, mutant: MutantName, name: str | None = None) -> None:
        self.mutant = mutant
        self.name = name or f"mutant:{mutant.value}"
        self._agent = DurableAgentAdapter()
        self.capabilities = self._agent.capabilities

    def start_args(self, spec: LaunchSpec, task: str) -> list[str]:
        return [self.mutant.value, *self._agent.start_args(spec, task)]

    def recover_args(self, spec: LaunchSpec) -> list[str]:
        return [self.mutant.value, *self._agent.recover_args(spec)]

    def deliver(self, spec: LaunchSpec, kind: str, item_id: str, text: str) -> None:
        self._agent.deliver(spec, kind, item_id, text)

    def env(self) -> dict[str, str]:
        return self._agent.env()

    def tear(self, spec: LaunchSpec) -> None:
        self._agent.tear(spec)

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        return self._agent.read_transcript(spec)

    def declared_tools(self) -> tuple[ToolSpec, ...]:
        return reference_tools()  # the reference agent's tools, whatever it does with them

    def declared_branches(self) -> tuple[str, ...]:
        return self._agent.declared_branches()
