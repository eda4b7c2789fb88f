"""A second incarnation beside a frozen one (fault `second`): started, recorded with snapshots, reaped.

The runner freezes the holder and hands a FREEZE fault a `FrozenIncarnation`; `start_second`
runs the intruder to its end through the runner (so it is stepped, bounded and reaped exactly as
any incarnation) and records what the verifier needs: its own record, what it printed, the
provider requests and the session directory and workspace before and after it. The holder is
stopped meanwhile, so whatever changed between the snapshots, the intruder changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from crashmatrix.harness.adapters.interface import Adapter, LaunchSpec
from crashmatrix.harness.execution.workspace_files import snapshot
from crashmatrix.harness.records.observation import IncarnationRecord, Intrusion

# args, its record, its output file, its deadline: runs an incarnation to its end (the runner's).
RunToEnd = Callable[[list[str], IncarnationRecord, Path, float], None]

# What of the intruder's output is kept: a refusal is one line; a runaway intruder is not read whole.
OUTPUT_TAIL = 4096


@dataclass
class FrozenIncarnation:
    """The holder, stopped, as a FREEZE fault sees it (`crashmatrix.harness.faults.interface.Frozen`)."""

    adapter: Adapter
    spec: LaunchSpec  # the intruder's: the session, workspace and policies a restart would get now
    pid: int  # the holder's
    holder: IncarnationRecord
    holder_command: str
    second_args: list[str]  # what a restart would run now: `recover`, or `run TASK` before acceptance
    second_command: str  # run | recover
    second_policies: dict[str, str]
    requests: Callable[[], int]  # provider requests recorded so far
    commits: Callable[[], int]  # commits in the store now
    run_to_end: RunToEnd
    case_dir: Path
    deadline: float  # the case's
    intrusions: list[Intrusion] = field(default_factory=list)

    def start_second(self) -> None:
        record = IncarnationRecord(self.holder.index, self.second_command, dict(self.second_policies),
                                   requests_before=self.requests(), commits_before=self.commits(),
                                   intruder=True)
        session, workspace = snapshot(self.spec.session), snapshot(self.spec.workspace)
        output = self.case_dir / f"inc{self.holder.index}.second{len(self.intrusions) + 1}.log"
        now = time.monotonic()
        # Half of what is left of the case: the holder, resumed afterwards, must have time to end.
        self.run_to_end(self.second_args, record, output, now + max(0.0, self.deadline - now) / 2)
        self.intrusions.append(Intrusion(
            holder=self.holder.index, holder_pid=self.pid, holder_command=self.holder_command,
            record=record, output=_tail(output), requests_after=self.requests(),
            session_before=session, session_after=snapshot(self.spec.session),
            workspace_before=workspace, workspace_after=snapshot(self.spec.workspace)))


def _tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - OUTPUT_TAIL))
            return f.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
