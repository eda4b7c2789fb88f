"""`power`: killed at a commit boundary, then the session's files set to what a power loss would leave.

An observing fault: the runner starts the incarnation it crashes under strace, with an image of
the session directory taken just before; once it is dead, `power_state` computes from its calls
and that image what the disk would hold had the power gone instead (each file as of its last
sync, names as of their folder's last sync), and `apply_observed` writes that over the session
directory. `power-keep1` is the same loss, except that the store file's first unsynced write
reached the disk (a torn tail at a write boundary; the store file: the one written last, the
commit's, not the lock record every incarnation writes first and never syncs). `power-names` is
the other order: every name change (create, rename, unlink) reached the disk though its folder
was not synced, and no unsynced byte did, so a file renamed into place before its bytes were
synced is there and empty (`power_state`, `names_now`). `power-blocks` persists a grown file's
length before its data: of what it gained since its last sync only the last 4 KiB block is kept,
the blocks before it read as zeros (`blocks`).

Enumerated at the two boundaries where what was written and what was synced differ:
- `commit.written`: the commit's bytes are written, not yet synced (with fsync on, the power loss
  takes exactly this unacknowledged commit; the agent must recover without it);
- `commit.after`: the commit is acknowledged (with fsync on, synced: it must survive; with fsync
  off nothing is, and `durable-commits` catches the loss).
At any other event an agent that syncs each commit has nothing of its log unsynced, so a power
loss there equals a kill (already in the matrix); a write the agent leaves unsynced elsewhere
(its settings, its lock) is still modelled at these two points, since it precedes them.

With `run --syscalls` it is also enumerated at each system-call point (a store call between two
probe events): strace kills the agent as its main thread enters the call, traced whole, and the
loss is computed from that trace as here (harness/execution/syscall_points.py).

Only the session directory is modelled: the workspace stands for the world the tools act on (in
production, other machines and services), which a power loss of the agent's host does not undo.
Not in the default set (`by_default`): each case costs a fresh interpreter under strace; select it
with `--fault power`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from crashmatrix.harness.adapters.interface import Adapter, Capability, LaunchSpec
from crashmatrix.harness.faults.interface import AtCrash, Frozen, Observed
from crashmatrix.harness.faults.power_state import PowerState, TargetKind, power_state

POWER_AT = frozenset({"commit.written", "commit.after"})


class Power:
    requires = frozenset({Capability.KILL, Capability.FILE_STORE})
    at_crash = AtCrash.KILL
    observes = True
    by_default = False
    # Not at black-box store calls: it needs every call on the session, and a black-box kill
    # traces one file. At system-call points (`--syscalls`) it is, as an observing KILL fault.
    at_store_calls = False

    def __init__(self, name: str, keep: int, names_now: bool = False, blocks: bool = False) -> None:
        self.name = name
        self.keep = keep  # unsynced writes of the store file that reach the disk anyway, first first
        self.names_now = names_now  # every name change reached the disk, synced or not
        self.blocks = blocks  # a grown file's length before its data: only its last block kept

    def enumerated_at(self, kind: str, label: str) -> bool:
        return kind in POWER_AT

    def apply(self, adapter: Adapter, spec: LaunchSpec) -> None:
        pass  # observes: the runner calls apply_observed instead

    def while_frozen(self, frozen: Frozen) -> None:
        pass  # a KILL fault is never frozen

    def apply_observed(self, observed: Observed) -> None:
        state = power_state(observed.calls, observed.before, self.keep, self.names_now, self.blocks)
        write_state(state)
        note_state(observed, state)


def note_state(observed: Observed, state: PowerState, *first: str) -> None:
    """Say what the loss did, on the incarnation's record: `first` lines, then one per change."""
    if not observed.fsync:
        observed.note("power loss with --fsync off: the agent was told not to sync its commits")
    for line in [*first, *(state.notes or ["power loss: every write had been synced; nothing changed"])]:
        observed.note(line)


def write_state(state: PowerState) -> None:
    """Make the files what `state` says: every source is read before anything is changed (a
    rename undone moves content between names)."""
    sources = {t.source: Path(t.source).read_bytes() for t in state.targets.values()
               if t.kind is TargetKind.PREFIX and t.source is not None and Path(t.source).is_file()}
    for path, target in sorted(state.targets.items()):
        p = Path(path)
        if target.kind is TargetKind.ABSENT:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)
    for path, target in sorted(state.targets.items()):
        p = Path(path)
        if target.kind is TargetKind.DIR:
            p.mkdir(parents=True, exist_ok=True)
        elif p.is_dir() and not p.is_symlink():
            # A directory has no bytes to keep or cut: a content target on one comes from a call
            # on its descriptor (an fsync of the directory, as the inbox's); its entries are
            # targets of their own (issue 33, P1: IsADirectoryError on session/inbox).
            continue
        elif target.kind is TargetKind.BYTES and target.data is not None:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(target.data)
        elif target.kind is TargetKind.PREFIX and target.source is not None:
            data = sources.get(target.source, b"")
            kept = bytearray(data if target.length is None else data[:target.length])
            for start, end in target.holes:  # blocks that never reached the disk read as zeros
                kept[start:end] = bytes(len(kept[start:end]))
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(bytes(kept))


POWER = Power("power", keep=0)
POWER_KEEP1 = Power("power-keep1", keep=1)
POWER_NAMES = Power("power-names", keep=0, names_now=True)
POWER_BLOCKS = Power("power-blocks", keep=0, blocks=True)
