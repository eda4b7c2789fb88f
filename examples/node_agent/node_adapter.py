"""The Node agent's crashmatrix adapter: `crashmatrix run --agent node_adapter:AGENT` from this folder."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.adapters.interface import Capability, LaunchSpec
from crashmatrix.harness.adapters.store_dump import dumped_transcript
from crashmatrix.harness.records.transcript import Transcript

AGENT_JS = Path(__file__).resolve().parent / "agent.js"  # absolute: incarnations run in other dirs


class NodeAdapter:
    name = "node"
    program = ("node", str(AGENT_JS))  # any command line: the harness needs no Python in the agent
    python = None  # nothing for the zygote to import: every incarnation is a fresh process
    capabilities = frozenset({Capability.KILL})  # no inbox, no torn writes, no store reader

    def start_args(self, spec: LaunchSpec, task: str) -> list[str]:
        return ["run", *self._where(spec), task]

    def recover_args(self, spec: LaunchSpec) -> list[str]:
        return ["recover", *self._where(spec)]

    def _where(self, spec: LaunchSpec) -> list[str]:
        return [str(spec.session), str(spec.workspace), spec.provider_url, ",".join(spec.tools)]

    def env(self) -> dict[str, str]:
        return {}

    def declared_branches(self) -> tuple[str, ...]:
        return ()  # the agent emits no recovery.branch events


AGENT = NodeAdapter()


class StoredNodeAdapter(NodeAdapter):
    """The same agent with its store read: `agent.js dump SESSION` prints it in crashmatrix's
    store-dump format, so every invariant is judged with no reader written in Python."""

    capabilities = frozenset({Capability.KILL, Capability.STORE})

    def dump_args(self, session: Path) -> list[str]:
        return ["dump", str(session)]

    def read_transcript(self, spec: LaunchSpec) -> Transcript:
        return dumped_transcript(self, spec, self.dump_args)


STORED = StoredNodeAdapter()  # `crashmatrix run --agent node_adapter:STORED`
