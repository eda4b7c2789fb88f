"""`power-keep1`: the write kept is the store file's first unsynced one, never the lock's record. Pure."""

from __future__ import annotations

from crashmatrix.harness.execution.fs_trace import parse
from crashmatrix.harness.faults.power_state import PowerState, Target, TargetKind, power_state
from crashmatrix.harness.records.tree_image import TreeImage

ROOT = "/c/s"
LOG = f"{ROOT}/session.jsonl"
LOCK = f"{ROOT}/session.lock"
BEFORE = TreeImage(ROOT, exists=True, files={LOCK: b""}, dirs=frozenset({ROOT}))

# Every incarnation of our agent, as strace saw one: the lock's holder record first (written,
# never synced: it names the live holder, nothing to keep), then the log, each commit written and
# synced; killed at the third commit's `commit.written` (written, not yet synced).
INCARNATION = f"""
openat(AT_FDCWD</c>, "{LOCK}", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3<{LOCK}>
ftruncate(3<{LOCK}>, 0) = 0
pwrite64(3<{LOCK}>, "{{\\"pid\\": 7}}", 12, 0) = 12
openat(AT_FDCWD</c>, "{LOG}", O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0644) = 4<{LOG}>
openat(AT_FDCWD</c>, "{ROOT}", O_RDONLY|O_CLOEXEC) = 5<{ROOT}>
fsync(5<{ROOT}>) = 0
write(4<{LOG}>, "a", 100) = 100
fsync(4<{LOG}>) = 0
write(4<{LOG}>, "b", 50) = 50
fsync(4<{LOG}>) = 0
write(4<{LOG}>, "c", 30) = 30
"""


def run(keep: int, extra: str = "") -> PowerState:
    lines = (INCARNATION + extra).strip().splitlines()
    return power_state(parse(f"1 {line.strip()}\n" for line in lines), BEFORE, keep)


def test_keep1_keeps_the_unacknowledged_commit_that_power_takes() -> None:
    lost, kept = run(0), run(1)
    assert lost.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=150)
    assert kept.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=180)
    assert "s/session.jsonl: kept 180 of 180 bytes (30 unsynced kept)" in kept.notes
    # The lock's record, its first unsynced write, is lost all the same: it is not what is kept.
    assert kept.targets[LOCK] == lost.targets[LOCK] == Target(TargetKind.BYTES, data=b"")


def test_keep1_keeps_only_the_first_unsynced_write_of_the_log() -> None:
    state = run(1, f'write(4<{LOG}>, "d", 20) = 20\n')
    assert state.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=180)


def test_with_every_log_write_synced_keep1_is_power() -> None:
    synced = run(1, f"fsync(4<{LOG}>) = 0\n")  # killed at `commit.after`
    assert synced.targets == run(0, f"fsync(4<{LOG}>) = 0\n").targets
    assert synced.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=180)
