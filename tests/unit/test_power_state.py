"""The power-loss model: from an incarnation's calls and the folder before it, what the disk keeps. Pure."""

from __future__ import annotations

from crashmatrix.harness.execution.fs_trace import parse
from crashmatrix.harness.faults.power_state import PowerState, Target, TargetKind, power_state
from crashmatrix.harness.records.tree_image import TreeImage

ROOT = "/c/s"
EMPTY = TreeImage(ROOT, exists=False)
LOG = f"{ROOT}/session.jsonl"


def run(lines: str, before: TreeImage = EMPTY, keep: int = 0) -> PowerState:
    return power_state(parse(f"1 {line.strip()}\n" for line in lines.strip().splitlines()), before, keep)


def had(files: dict[str, bytes]) -> TreeImage:
    return TreeImage(ROOT, exists=True, files={f"{ROOT}/{k}": v for k, v in files.items()},
                     dirs=frozenset({ROOT}))


# The agent's first commits, with fsync on: folder made and its parent synced, log created and
# its folder synced, two commits each synced, a third written and not.
FIRST_RUN = """
mkdir("/c/s", 0777) = 0
openat(AT_FDCWD</c>, "/c", O_RDONLY) = 3</c>
fsync(3</c>) = 0
openat(AT_FDCWD</c>, "/c/s/session.jsonl", O_WRONLY|O_CREAT|O_APPEND, 0644) = 4</c/s/session.jsonl>
openat(AT_FDCWD</c>, "/c/s", O_RDONLY) = 5</c/s>
fsync(5</c/s>) = 0
write(4</c/s/session.jsonl>, "a", 100) = 100
fsync(4</c/s/session.jsonl>) = 0
write(4</c/s/session.jsonl>, "b", 50) = 50
fsync(4</c/s/session.jsonl>) = 0
write(4</c/s/session.jsonl>, "c", 30) = 30
"""


def test_an_append_only_log_is_cut_back_to_its_last_sync() -> None:
    state = run(FIRST_RUN)
    assert state.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=150)
    assert state.targets[ROOT] == Target(TargetKind.DIR)
    assert "s/session.jsonl: cut back to 150 of 180 bytes (its last sync)" in state.notes


def test_keep_one_keeps_the_first_unsynced_write_whole() -> None:
    state = run(FIRST_RUN + 'write(4</c/s/session.jsonl>, "d", 20) = 20\n', keep=1)
    assert state.targets[LOG] == Target(TargetKind.PREFIX, source=LOG, length=180)


def test_a_created_file_whose_folder_was_never_synced_vanishes() -> None:
    state = run("""
        mkdir("/c/s", 0777) = 0
        openat(AT_FDCWD</c>, "/c/s/session.jsonl", O_WRONLY|O_CREAT|O_APPEND, 0644) = 4</c/s/session.jsonl>
        write(4</c/s/session.jsonl>, "a", 100) = 100
        fsync(4</c/s/session.jsonl>) = 0
    """)
    # Its bytes were synced, its name never was; nor was the folder's own name.
    assert state.targets[LOG].kind is TargetKind.ABSENT
    assert state.targets[ROOT].kind is TargetKind.ABSENT


def test_a_rename_not_followed_by_a_folder_sync_is_undone() -> None:
    state = run("""
        openat(AT_FDCWD</c>, "/c/s/config.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 5</c/s/config.tmp>
        write(5</c/s/config.tmp>, "new", 3) = 3
        fsync(5</c/s/config.tmp>) = 0
        close(5</c/s/config.tmp>) = 0
        rename("/c/s/config.tmp", "/c/s/config.json") = 0
    """, had({"config.json": b"old"}))
    assert state.targets[f"{ROOT}/config.json"] == Target(TargetKind.BYTES, data=b"old")
    # The temporary name: never durable, and gone now: nothing to undo.
    assert f"{ROOT}/config.tmp" not in state.targets
    assert "s/config.json: its name holds the file it held at its folder's last sync (a rename or " \
        "unlink not synced is undone)" in state.notes


def test_a_rename_followed_by_a_folder_sync_stands_with_the_synced_bytes() -> None:
    state = run("""
        openat(AT_FDCWD</c>, "/c/s/config.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 5</c/s/config.tmp>
        write(5</c/s/config.tmp>, "new", 3) = 3
        fsync(5</c/s/config.tmp>) = 0
        rename("/c/s/config.tmp", "/c/s/config.json") = 0
        openat(AT_FDCWD</c>, "/c/s", O_RDONLY) = 6</c/s>
        fsync(6</c/s>) = 0
    """, had({"config.json": b"old"}))
    assert state.targets[f"{ROOT}/config.json"] == Target(TargetKind.PREFIX, source=f"{ROOT}/config.json",
                                                          length=3)
    assert f"{ROOT}/config.tmp" not in state.targets


def test_a_renamed_file_never_synced_is_empty_under_its_synced_name() -> None:
    # The zero-length-file lesson: rename over, folder synced, the file's data never.
    state = run("""
        openat(AT_FDCWD</c>, "/c/s/config.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 5</c/s/config.tmp>
        write(5</c/s/config.tmp>, "new", 3) = 3
        rename("/c/s/config.tmp", "/c/s/config.json") = 0
        openat(AT_FDCWD</c>, "/c/s", O_RDONLY) = 6</c/s>
        fsync(6</c/s>) = 0
    """, had({"config.json": b"old"}))
    assert state.targets[f"{ROOT}/config.json"] == Target(TargetKind.BYTES, data=b"")


def test_an_unsynced_unlink_is_undone() -> None:
    state = run('unlink("/c/s/inbox.json") = 0', had({"inbox.json": b"{}"}))
    assert state.targets[f"{ROOT}/inbox.json"] == Target(TargetKind.BYTES, data=b"{}")


def test_a_file_never_synced_goes_back_to_its_bytes_before_the_incarnation() -> None:
    state = run("""
        openat(AT_FDCWD</c>, "/c/s/session.jsonl", O_WRONLY|O_APPEND) = 4</c/s/session.jsonl>
        write(4</c/s/session.jsonl>, "x", 9) = 9
    """, had({"session.jsonl": b"committed\n"}))
    assert state.targets[LOG] == Target(TargetKind.BYTES, data=b"committed\n")


def test_a_rewrite_below_the_synced_length_is_unmodelled_and_says_so() -> None:
    state = run("""
        openat(AT_FDCWD</c>, "/c/s/state", O_RDWR) = 4</c/s/state>
        write(4</c/s/state>, "x", 8) = 8
        fsync(4</c/s/state>) = 0
        pwrite64(4</c/s/state>, "y", 2, 0) = 2
    """, had({"state": b""}))
    target = state.targets[f"{ROOT}/state"]
    assert target.kind is TargetKind.UNMODELLED
    assert state.unmodelled == [f"{ROOT}/state"]
    assert any("left as it is" in n for n in state.notes)


def test_a_plain_write_lands_where_lseek_left_it() -> None:
    state = run("""
        openat(AT_FDCWD</c>, "/c/s/f", O_WRONLY) = 4</c/s/f>
        lseek(4</c/s/f>, 0, SEEK_END) = 4
        write(4</c/s/f>, "b", 2) = 2
        fsync(4</c/s/f>) = 0
        write(4</c/s/f>, "c", 3) = 3
    """, had({"f": b"aaaa"}))
    assert state.targets[f"{ROOT}/f"] == Target(TargetKind.PREFIX, source=f"{ROOT}/f", length=6)


def test_files_the_calls_never_touched_are_left_alone() -> None:
    state = run(FIRST_RUN)
    assert set(state.targets) == {ROOT, LOG}
