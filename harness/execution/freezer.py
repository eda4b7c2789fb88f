"""What the runner hands a FREEZE fault: the frozen incarnation, and a way to start a second one beside it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from crashmatrix.harness.adapters.interface import Adapter, LaunchSpec
from crashmatrix.harness.execution.incarnation import Incarnation
from crashmatrix.harness.execution.incarnation_command import command_for
from crashmatrix.harness.execution.intruder import FrozenIncarnation
from crashmatrix.harness.execution.session_files import count_commits
from crashmatrix.harness.execution.stop_signals import CaseAborted
from crashmatrix.harness.records.observation import Delivery, IncarnationRecord, Intrusion
from crashmatrix.scenarios.model import Scenario


class Runner(Protocol):
    """The case runner, as far as a frozen incarnation needs it (runner.py's CaseRunner)."""

    @property
    def stop(self) -> threading.Event: ...

    def accepted(self, spec: LaunchSpec, incarnations: list[IncarnationRecord],
                 probes: bool = True) -> bool: ...

    def run_incarnation(self, args: list[str], spec: LaunchSpec, record: IncarnationRecord, step: Any,
                        scenario: Scenario, deliveries: list[Delivery], deadline: float, case_dir: Path,
                        cover: tuple[Path, str] | None, *, output: Path | None = None) -> None: ...


@dataclass
class Freezer:
    """What the runner knows of a case when an incarnation is frozen: enough to start a second
    one beside it, as a restart would be started now."""

    runner: Runner
    adapter: Adapter
    requests: Callable[[], int]  # how many requests the case's agents have made so far
    base: LaunchSpec
    scenario: Scenario
    case_key: str
    case_dir: Path
    deliveries: list[Delivery]
    deadline: float
    accepted: bool
    incarnations: list[IncarnationRecord]
    intrusions: list[Intrusion]  # the case's: every intruder recorded is added here
    holder_command: str

    def frozen(self, inc: Incarnation, holder: IncarnationRecord) -> FrozenIncarnation:
        runner = self.runner
        # The command a restart would run now: `recover` once the task is in the store.
        accepted = self.accepted or runner.accepted(self.base, self.incarnations)
        spec, args, policies = command_for(self.adapter, self.base, self.scenario, accepted)

        def run_to_end(second: list[str], record: IncarnationRecord, output: Path, until: float) -> None:
            # The matrix stops by setting `stop` and killing what runs: no process may start after
            # (an interrupt while the holder is frozen would otherwise still start the intruder).
            if runner.stop.is_set():
                raise CaseAborted(self.case_key)
            runner.run_incarnation(second, spec, record, None, self.scenario, self.deliveries, until,
                                   self.case_dir, None, output=output)

        return FrozenIncarnation(
            adapter=self.adapter, spec=spec, pid=inc.pid, holder=holder,
            holder_command=self.holder_command, second_args=args,
            second_command="recover" if accepted else "run", second_policies=policies,
            requests=self.requests,
            commits=lambda: count_commits(self.base.session / "session.jsonl"),
            run_to_end=run_to_end, case_dir=self.case_dir, deadline=self.deadline,
            intrusions=self.intrusions)
