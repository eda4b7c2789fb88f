"""The toy agent's crashmatrix adapter: `crashmatrix run --agent toyagent.adapter:AGENT`."""

from __future__ import annotations

import sys
from pathlib import Path

from crashmatrix.harness.adapters.interface import Capability, LaunchSpec


class ToyAdapter:
    name = "toy"
    program = (sys.executable, "-m", "toyagent.agent")  # any command line would do
    python = None  # not forked from the zygote: every incarnation is a fresh process
    capabilities = frozenset({Capability.KILL})  # no inbox, no torn writes, no store reader

    def start_args(self, spec: LaunchSpec, task: str) -> list[str]:
        return ["run", *self._where(spec), task]

    def recover_args(self, spec: LaunchSpec) -> list[str]:
        return ["recover", *self._where(spec)]

    def _where(self, spec: LaunchSpec) -> list[str]:
        return [str(spec.session), str(spec.workspace), spec.provider_url, ",".join(spec.tools)]

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(Path(__file__).resolve().parents[1])}  # where toyagent lives

    def declared_branches(self) -> tuple[str, ...]:
        return ()


AGENT = ToyAdapter()
