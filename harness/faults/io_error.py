"""I/O errors by system-call injection: a log sync failing with EIO, a write with ENOSPC, a short write.

Each case makes one call fail: the `n`-th fsync (or write) the first incarnation makes on the
session log, `changelog/03:fsync:session.jsonl/eio-fsync`. The incarnation runs under strace with
that call injected (`-P` counts only the log's calls) and runs to its end: a durable agent stops
there, with an error and a nonzero exit, having acted on nothing it had not saved. Then the case
goes on as after any fault: `recover` on a healthy disk, and the settle run.

- `eio-fsync`: after a failed sync the bytes it was to save never reach the disk (the kernel
  marked their pages clean: PostgreSQL's fsync lesson), even if a later sync succeeds;
  `apply_observed` sets the log to that (`sync_loss`): an agent that carries on is caught by the
  commits it acknowledged and the disk lost.
- `enospc-write`: the write fails, nothing written (a full disk).
- `short-write`: the write writes its first SHORT_COUNT bytes and returns that count, as the
  kernel does at a file-size limit or a nearly full disk: an agent must write the rest after
  them. strace cannot make a call write part of its bytes (it skips a call it makes return a
  count), so the call is skipped and, once the incarnation has ended, the prefix is put back
  where it landed (`short_write`). Not a count of 0 with nothing written, as this fault was
  first: after that, writing the whole buffer again is right, so an agent that takes a short
  write for complete (or resends the whole buffer) passed it.

Cases are counted from the recording's probe events: the k-th `commit.written` is followed by the
log's k-th sync, the k-th `commit.before` by its k-th write (one write and one sync per commit, as
the commit contract asks). A case whose call never comes (an agent that writes or syncs
otherwise, or `--fsync off`) is reported nondeterministic, never as held. Only a first
incarnation is injected (its calls are the recording's). Not in the default set: `--fault`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from crashmatrix.harness.adapters.interface import Adapter, Capability, LaunchSpec
from crashmatrix.harness.faults.interface import AtCrash, Frozen, Observed
from crashmatrix.harness.faults.short_write import Unmodelled, put_back, short_write
from crashmatrix.harness.faults.sync_loss import lose, sync_loss
from crashmatrix.harness.records.case import CrashStep
from crashmatrix.harness.records.fs_calls import Syscall

STORE_LOG = "session.jsonl"  # the session log, relative to the session directory
# The bytes a short write writes: fewer than any commit's line (a JSON object with a sequence
# number, entries and a checksum is well over this), and within what strace shows of a buffer
# (`fs_inject.SHOWN`).
SHORT_COUNT = 16


class IoError:
    requires = frozenset({Capability.FILE_STORE})
    at_crash = AtCrash.INJECT
    observes = True
    by_default = False
    at_store_calls = False  # its steps are store calls already (made to fail, not killed at)

    def __init__(self, name: str, syscall: Syscall, anchor: str, how: str, *, must_stop: bool) -> None:
        self.name = name
        self.syscall = syscall
        self.anchor = anchor
        self.how = how
        self.must_stop = must_stop

    def enumerated_at(self, kind: str, label: str) -> bool:
        return False  # at no probe event: its steps count system calls (`steps`)

    def steps(self, points: Sequence[str]) -> list[CrashStep]:
        count = sum(1 for p in points if p.partition(":")[0] == self.anchor)
        return [CrashStep(k, self.syscall.value, STORE_LOG, self.name) for k in range(1, count + 1)]

    def apply(self, adapter: Adapter, spec: LaunchSpec) -> None:
        pass  # observes: the runner calls apply_observed instead

    def while_frozen(self, frozen: Frozen) -> None:
        pass  # never frozen

    def apply_observed(self, observed: Observed) -> None:
        path = observed.spec.session / STORE_LOG
        before = observed.before.files.get(str(path), b"")
        # strace shows fds by their resolved path.
        loss = sync_loss(observed.calls, os.path.realpath(path), len(before))
        if not loss.changes or not path.is_file():
            return
        data = path.read_bytes()
        path.write_bytes(lose(data, loss))
        rel = Path(observed.spec.session.name) / STORE_LOG
        lost = sum(n for _, n in loss.holes) + max(0, len(data) - loss.length)
        observed.note(f"{rel}: {lost} bytes a failed sync was to save never reached the disk "
                      f"({len(data)} -> {loss.length} bytes, {len(loss.holes)} hole(s) of zeros)")


class ShortWrite(IoError):
    """The write wrote a prefix and said so: strace skipped it with a short count; the prefix is
    put back once the incarnation has ended."""

    def apply_observed(self, observed: Observed) -> None:
        path = observed.spec.session / STORE_LOG
        rel = Path(observed.spec.session.name) / STORE_LOG
        before = observed.before.files.get(str(path), b"")
        found = short_write(observed.calls, os.path.realpath(path), len(before))
        if isinstance(found, Unmodelled):
            observed.note(f"{rel}: left as it is: {found.why}")
        elif found is not None and path.is_file():
            path.write_bytes(put_back(path.read_bytes(), found))
            observed.note(f"{rel}: the short write wrote {len(found.data)} of {found.asked} bytes, "
                          f"at offset {found.offset} (put back there after the incarnation)")


EIO_FSYNC = IoError("eio-fsync", Syscall.FSYNC, "commit.written", "error=EIO", must_stop=True)
ENOSPC_WRITE = IoError("enospc-write", Syscall.WRITE, "commit.before", "error=ENOSPC", must_stop=True)
SHORT_WRITE = ShortWrite("short-write", Syscall.WRITE, "commit.before", f"retval={SHORT_COUNT}",
                         must_stop=False)
