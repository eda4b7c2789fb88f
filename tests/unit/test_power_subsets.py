"""`power-subsets`: any subset of the unsynced writes on disk, named by a mask in the case id. Pure."""

from __future__ import annotations

import pytest

from crashmatrix.harness.adapters.durable import DurableAgentAdapter
from crashmatrix.harness.enumeration import crash_loop_extension, variant_siblings
from crashmatrix.harness.execution.fs_trace import parse
from crashmatrix.harness.faults.power_state import MaskMismatch, PowerState, Target, TargetKind, power_state
from crashmatrix.harness.faults.power_subsets import EVERY_SUBSET_UP_TO, masks
from crashmatrix.harness.faults.registry import check_faults
from crashmatrix.harness.records.case import Case, CaseIdError, CrashStep
from crashmatrix.harness.records.tree_image import TreeImage

ROOT = "/c/s"
LOG = f"{ROOT}/session.jsonl"
LOCK = f"{ROOT}/session.lock"
BEFORE = TreeImage(ROOT, exists=True, files={LOCK: b"", LOG: b"x" * 100}, dirs=frozenset({ROOT}))

# A group commit: three appends to a log synced at 100 bytes, one sync due after them, across
# three 4 KiB blocks (the first two writes share block 1, the last two block 2), and the lock's
# holder record rewritten in place (truncated below its synced length: never a subset's).
GROUP = f"""
openat(AT_FDCWD</c>, "{LOCK}", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 3<{LOCK}>
pwrite64(3<{LOCK}>, "{{\\"pid\\": 7}}", 12, 0) = 12
fsync(3<{LOCK}>) = 0
ftruncate(3<{LOCK}>, 0) = 0
openat(AT_FDCWD</c>, "{LOG}", O_WRONLY|O_APPEND|O_CLOEXEC) = 4<{LOG}>
write(4<{LOG}>, "a", 4000) = 4000
write(4<{LOG}>, "b", 4096) = 4096
write(4<{LOG}>, "c", 100) = 100
"""


def run(mask: str | None, extra: str = "") -> PowerState:
    lines = (GROUP + extra).strip().splitlines()
    return power_state(parse(f"1 {line.strip()}\n" for line in lines), BEFORE, mask=mask)


def test_the_blocks_a_mask_ranges_over_are_those_appends_to_modelled_files_dirtied() -> None:
    state = run(None)
    assert state.subset_blocks == 3  # the log's blocks 0, 1, 2; not the lock's in-place rewrite
    assert state.targets[LOG] == Target(TargetKind.BYTES, data=b"x" * 100)  # as `power` leaves it


def test_an_earlier_block_dropped_under_a_kept_one_reads_as_zeros_past_the_synced_length() -> None:
    state = run("001")
    assert state.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=8296,
                                        holes=((100, 4096), (4096, 8192)))
    assert any("those marked 1 in 001 reached the disk, bytes 100 to 4096 zeros" in n for n in state.notes)


def test_dropped_blocks_past_the_last_kept_one_are_cut_off() -> None:
    assert run("100").targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=4096)
    assert run("101").targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=8296,
                                             holes=((4096, 8192),))
    assert run("111").targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=8296)


def test_writes_into_one_block_are_kept_or_lost_together() -> None:
    small = f"""
        openat(AT_FDCWD</c>, "{LOG}", O_WRONLY|O_APPEND|O_CLOEXEC) = 4<{LOG}>
        write(4<{LOG}>, "a", 40) = 40
        write(4<{LOG}>, "b", 30) = 30
    """
    lines = small.strip().splitlines()
    state = power_state(parse(f"1 {line.strip()}\n" for line in lines), BEFORE, mask="1")
    assert state.subset_blocks == 1  # a page is written back whole: no state splits it
    assert state.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=170)


def test_a_mask_of_another_length_or_alphabet_is_refused_not_bent_to_fit() -> None:
    with pytest.raises(MaskMismatch, match="names 2 unsynced blocks; this run left 3"):
        run("01")
    with pytest.raises(MaskMismatch, match="not made of 0 and 1"):
        run("0a1")


def test_a_file_rewritten_in_place_gives_no_subsets() -> None:
    # A write below the synced length: no subset of its blocks is a state the final file shows.
    state = run(None, f'pwrite64(4<{LOG}>, "z", 10, 5) = 10\n')
    assert state.subset_blocks == 0


def test_writes_to_a_file_whose_name_is_not_durable_give_no_subsets() -> None:
    new = f"{ROOT}/notes.txt"
    state = run(None, f"""
        openat(AT_FDCWD</c>, "{new}", O_WRONLY|O_CREAT|O_APPEND, 0644) = 6<{new}>
        write(6<{new}>, "n", 5) = 5
    """)
    assert state.subset_blocks == 3  # the new file vanishes whatever its bytes did


def test_masks_are_every_nonempty_subset_then_each_write_alone_and_each_dropped_alone() -> None:
    assert masks(0) == []
    assert masks(1) == ["1"]
    assert masks(3) == ["001", "010", "011", "100", "101", "110", "111"]
    assert len(masks(EVERY_SUBSET_UP_TO)) == 2 ** EVERY_SUBSET_UP_TO - 1
    many = masks(EVERY_SUBSET_UP_TO + 2)
    n = EVERY_SUBSET_UP_TO + 2
    assert len(many) == 2 * n
    assert all(m.count("1") in (1, n - 1) for m in many)


STEP = "12:commit.written:tool_started.append_note/power-subsets"


def test_a_variant_is_part_of_the_case_id_and_parses_back() -> None:
    case = Case.parse(f"changelog/{STEP}:011")
    assert case.schedule[0].variant == "011"
    assert case.schedule[0].fault == "power-subsets"
    assert case.case_id == f"changelog/{STEP}:011"
    assert Case.parse(f"changelog/{STEP}") != case  # the variant is part of the identity
    with pytest.raises(CaseIdError, match="bad variant"):
        Case.parse(f"changelog/{STEP}:0-1")


def test_only_a_fault_with_variants_takes_one() -> None:
    adapter = DurableAgentAdapter()
    check_faults(Case.parse(f"changelog/{STEP}:011"), adapter)
    with pytest.raises(CaseIdError, match="fault 'kill' has no variants"):
        check_faults(Case.parse("changelog/12:commit.written:tool_started.append_note/kill:011"), adapter)


def test_siblings_replace_the_last_step_only_once() -> None:
    first = CrashStep.parse("05:commit.after:run_started/kill")
    case = Case("changelog", (first, CrashStep.parse(STEP)))
    siblings = variant_siblings(case, ["01", "10"])
    assert [c.case_id for c in siblings] == [f"changelog/{first.token()}+{STEP}:01",
                                            f"changelog/{first.token()}+{STEP}:10"]
    assert variant_siblings(siblings[0], ["11"]) == []  # a variant offers none of its own


def test_a_crash_loop_repeats_the_point_not_the_variant() -> None:
    case = Case.parse(f"changelog/{STEP}:011")
    loop = crash_loop_extension(case, [["x"] * 11 + ["commit.written:tool_started.append_note"]] * 2, 3)
    assert loop is not None
    assert loop.schedule[-1].variant is None
