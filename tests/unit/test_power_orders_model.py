"""The other orders a power loss may keep: names before bytes, a length before its blocks. Pure."""

from __future__ import annotations

from crashmatrix.harness.execution.fs_trace import parse
from crashmatrix.harness.faults.power_state import PowerState, Target, TargetKind, power_state
from crashmatrix.harness.records.tree_image import TreeImage

ROOT = "/c/s"
CONFIG = f"{ROOT}/config.json"
TMP = f"{ROOT}/config.tmp"
OLD = f"{ROOT}/old.item"
BEFORE = TreeImage(ROOT, exists=True, files={CONFIG: b'{"a": 1}', OLD: b"x"}, dirs=frozenset({ROOT}))

# The settings replaced by a temporary file renamed over them, nothing synced; an item unlinked,
# its folder not synced either.
UNSYNCED = f"""
openat(AT_FDCWD</c>, "{TMP}", O_WRONLY|O_CREAT|O_TRUNC|O_CLOEXEC, 0644) = 3<{TMP}>
write(3<{TMP}>, "{{}}", 2) = 2
close(3<{TMP}>) = 0
rename("{TMP}", "{CONFIG}") = 0
unlink("{OLD}") = 0
"""


def run(trace: str, names_now: bool) -> PowerState:
    lines = trace.strip().splitlines()
    return power_state(parse(f"1 {line.strip()}\n" for line in lines), BEFORE, names_now=names_now)


def test_a_rename_persisted_before_its_bytes_leaves_the_new_name_empty() -> None:
    strict, names = run(UNSYNCED, False), run(UNSYNCED, True)
    # The strict order undoes the rename: the old settings are back.
    assert strict.targets[CONFIG] == Target(TargetKind.BYTES, data=b'{"a": 1}')
    # The other order keeps the rename and loses the bytes: the settings file is there, empty.
    assert names.targets[CONFIG] == Target(TargetKind.BYTES, data=b"")
    assert "s/config.json: empty (created by this incarnation, none of its bytes synced)" in names.notes


def test_an_unsynced_unlink_is_undone_by_the_strict_order_and_kept_by_the_other() -> None:
    assert run(UNSYNCED, False).targets[OLD] == Target(TargetKind.BYTES, data=b"x")
    assert OLD not in run(UNSYNCED, True).targets


def test_bytes_synced_before_the_rename_survive_either_order() -> None:
    synced = UNSYNCED.replace("close(3", "fsync(3<" + TMP + ">) = 0\nclose(3")
    names = run(synced, True)
    assert names.targets[CONFIG] == Target(TargetKind.PREFIX, source=CONFIG, length=2)


LOG = f"{ROOT}/session.jsonl"
GROWN = f"""
openat(AT_FDCWD</c>, "{LOG}", O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0644) = 4<{LOG}>
openat(AT_FDCWD</c>, "{ROOT}", O_RDONLY|O_CLOEXEC) = 5<{ROOT}>
fsync(5<{ROOT}>) = 0
write(4<{LOG}>, "a", 657) = 657
fsync(4<{LOG}>) = 0
write(4<{LOG}>, "b", 7138) = 7138
"""


def blocks(trace: str) -> PowerState:
    lines = trace.strip().splitlines()
    return power_state(parse(f"1 {line.strip()}\n" for line in lines), BEFORE, blocks=True)


def test_a_grown_file_keeps_its_length_and_only_the_last_block_of_what_it_gained() -> None:
    state = blocks(GROWN)
    assert state.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=7795, holes=((657, 4096),))
    strict = power_state(parse(f"1 {line.strip()}\n" for line in GROWN.strip().splitlines()), BEFORE)
    assert strict.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=657)


def test_a_file_that_gained_less_than_its_last_block_keeps_it_all() -> None:
    small = GROWN.replace('"b", 7138) = 7138', '"b", 300) = 300')
    assert blocks(small).targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=957)
