"""An incarnation under observation: a fresh process under strace, and an image of its session taken first.

Observed incarnations are always fresh processes (`python -m ...` or the adapter's `program`):
a zygote's fork cannot be traced from its first system call (strace would have to attach to a
child already running, with the calls before the attach unseen). Attaching `strace -p` to a
forked child stopped before it runs would keep the zygote's speed; a later optimisation.

The process tree: the harness starts strace (in a session of its own, dying with the harness),
strace starts `setpriv --pdeathsig KILL setsid PROGRAM ARGS`: the agent runs in a session and
process group of its own, not strace's, and is SIGKILLed by the kernel if strace dies. The
incarnation kills the agent's group as it kills any agent; strace sees its tracee die, writes
the rest of its output and exits; `wait` reaps strace, and the trace is read only after that.
"""

from __future__ import annotations

import functools
import os
import stat
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crashmatrix.harness.adapters.interface import Adapter, LaunchSpec
from crashmatrix.harness.execution.fs_trace import strace_argv, strace_path
from crashmatrix.harness.execution.spawn import (
    Launch,
    Process,
    SpawnMode,
    agent_env,
    die_with_parent,
    output_fd,
)
from crashmatrix.harness.execution.trees import walk
from crashmatrix.harness.records.fs_calls import FsCall
from crashmatrix.harness.records.observation import IncarnationRecord
from crashmatrix.harness.records.tree_image import TreeImage

# How long `pid` waits for strace to have started its tracee (it has, long before the first
# probe event; this bounds a tracer that failed to start anything).
PID_WAIT_S = 5.0


class TracedProcess:
    """strace, as an incarnation's process: `pid` is the agent's (the leader of its group, which
    the incarnation kills), `poll` and `wait` are strace's, which ends when its tracees have
    ended and exits as the agent did (its code, or the signal that killed it)."""

    def __init__(self, tracer: subprocess.Popen[bytes]) -> None:
        self.tracer = tracer
        self._pid: int | None = None

    @property
    def pid(self) -> int:
        if self._pid is None:
            self._pid = self._tracee()
        return self._pid

    def _tracee(self) -> int:
        deadline = time.monotonic() + PID_WAIT_S
        while time.monotonic() < deadline and self.tracer.poll() is None:
            try:
                with open(f"/proc/{self.tracer.pid}/task/{self.tracer.pid}/children", encoding="ascii") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                kids = []
            for kid in kids:
                try:
                    if os.getsid(kid) == kid:  # past `setsid`: the leader of its own group
                        return kid
                except OSError:
                    continue
            time.sleep(0.001)
        # No tracee (strace failed to start one, or it is gone): strace leads only its own group.
        return self.tracer.pid

    def poll(self) -> int | None:
        return self.tracer.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.tracer.wait(timeout)


class TracedSpawner:
    """Starts one incarnation under strace, its output to `trace`."""

    mode = SpawnMode.FRESH

    def __init__(self, trace: Path, extra: Sequence[str] = (), *, seccomp: bool = True,
                 follow: bool = True) -> None:
        self.trace = trace
        self.extra = list(extra)  # more strace options: a call to inject (`fs_inject.inject_args`)
        self.seccomp = seccomp  # False for an injected signal (`fs_trace.strace_argv`)
        self.follow = follow  # False: the main thread only (`syscall_points.kill_args`)
        self.strace = strace_path()

    def spawn(self, launch: Launch, probe_fds: tuple[int, int]) -> Process:
        env = agent_env(launch, probe_fds)
        out = output_fd(launch)
        argv = [*strace_argv(self.strace, self.trace, seccomp=self.seccomp, follow=self.follow),
                *self.extra, "--",
                "setpriv", "--pdeathsig", "KILL", "--", "setsid", *launch.program, *launch.args]
        try:
            tracer = subprocess.Popen(
                argv, env=env, cwd=launch.cwd, stdin=subprocess.DEVNULL,
                stdout=out or subprocess.DEVNULL,
                stderr=subprocess.STDOUT if out else subprocess.DEVNULL,
                pass_fds=probe_fds,
                start_new_session=True,  # neither in the agent's group nor in the harness's
                preexec_fn=functools.partial(die_with_parent, os.getpid()),  # noqa: PLW1509 - as fresh.py
            )
        finally:
            if out is not None:
                os.close(out)
        return TracedProcess(tracer)

    def close(self) -> None:
        pass


def image_of(root: Path) -> TreeImage:
    """Every file (bytes) and folder under `root`; links and special files are not followed
    (they are not the agent's store: a power loss model of them would be guesswork)."""
    if not root.is_dir() or root.is_symlink():
        return TreeImage(str(root), exists=False)
    files: dict[str, bytes] = {}
    dirs = {str(root)}
    for dirpath, dirnames, filenames in walk(root):
        for name in dirnames:
            dirs.add(os.path.join(dirpath, name))
        for name in filenames:
            path = os.path.join(dirpath, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                files[path] = Path(path).read_bytes()
    return TreeImage(str(root), exists=True, files=files, dirs=frozenset(dirs))


@dataclass
class ObservedKill:
    """The dead incarnation as an observing fault sees it (`harness.faults.interface.Observed`)."""

    adapter: Adapter
    spec: LaunchSpec
    calls: list[FsCall]
    before: TreeImage
    fsync: bool
    variant: str | None = None
    notes: list[str] = field(default_factory=list)
    offered: list[str] = field(default_factory=list)
    drift: str | None = None

    def note(self, text: str) -> None:
        self.notes.append(text)

    def offer(self, variants: Sequence[str]) -> None:
        self.offered = list(variants)

    def drifted(self, why: str) -> None:
        self.drift = why

    def report(self, record: IncarnationRecord) -> None:
        """What the fault did, onto the incarnation's record."""
        record.fault_notes = self.notes
        record.variants = self.offered
        if self.drift is not None:
            record.nondeterministic = self.drift
