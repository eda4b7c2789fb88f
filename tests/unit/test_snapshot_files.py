"""Crash states hold files by their data (holes cost nothing, stay holes), FIFOs, sockets, within bounds."""

from __future__ import annotations

import os
import stat
import tracemalloc
from pathlib import Path

import pytest

from crashmatrix.fakes.case import CaseState
from crashmatrix.harness.execution.snapshot_files import Data
from crashmatrix.harness.execution.snapshot_limits import Limits, Refusal, Refused
from crashmatrix.harness.execution.states import key, restore, take

A = "tree-0123456789ab"
B = "tree-ba9876543210"
SPARSE = 64 << 20  # apparent size: holes cost nothing, on tmpfs and on disk
PROVIDER = CaseState((), (), {})


def case_tree(root: Path, name: str = A) -> Path:
    case_dir = root / name
    (case_dir / "session").mkdir(parents=True)
    (case_dir / "ws").mkdir()
    (case_dir / "session" / "session.jsonl").write_text(f'{{"in": "/x/{name}/ws"}}\n', encoding="utf-8")
    return case_dir


def holes_supported(where: Path) -> bool:
    probe = where / "probe"
    with open(probe, "wb") as f:
        f.truncate(SPARSE)
    try:
        return os.stat(probe).st_blocks * 512 < (1 << 20)
    finally:
        probe.unlink()


def test_a_sparse_file_is_held_by_its_data_and_restored_sparse(tmp_path: Path) -> None:
    """L6: a 200 MB sparse file was read whole at every event (2.9 GB of harness memory) and
    written back dense (1 GB of tmpfs); a 2 GB one was a MemoryError."""
    if not holes_supported(tmp_path):
        pytest.skip("this filesystem stores no holes")
    one = case_tree(tmp_path)
    middle = SPARSE // 2
    with open(one / "ws" / "sparse.bin", "wb") as f:
        f.truncate(SPARSE)
        f.seek(middle)
        f.write(f"data in /x/{A}/ws".encode())
    tracemalloc.start()
    try:
        snap = take(one, PROVIDER, 1, 3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"taking the snapshot held {peak} bytes: the holes were read"
    assert snap.tree.held < 1 << 20
    restore(snap, tmp_path / B)
    restored = tmp_path / B / "ws" / "sparse.bin"
    info = restored.stat()
    assert info.st_size == SPARSE
    assert info.st_blocks * 512 < 1 << 20, "the restored file is dense"
    with open(restored, "rb") as f:
        f.seek(middle)
        assert f.read(64).rstrip(b"\0") == f"data in /x/{B}/ws".encode(), "renamed in its extent"
        f.seek(0)
        assert f.read(4096) == bytes(4096)
    assert key(tmp_path / B, PROVIDER) == key(one, PROVIDER)


def test_a_file_over_a_bound_refuses_the_state_before_it_is_read(tmp_path: Path) -> None:
    one = case_tree(tmp_path)
    (one / "ws" / "big.bin").write_bytes(b"x" * 4096)
    with pytest.raises(Refused) as over_file:
        take(one, PROVIDER, 1, 1, limits=Limits(file_bytes=1024))
    assert over_file.value.reason is Refusal.FILE
    assert "ws/big.bin" in over_file.value.detail
    (one / "ws" / "big2.bin").write_bytes(b"y" * 4096)
    with pytest.raises(Refused) as over_tree:
        take(one, PROVIDER, 1, 1, limits=Limits(tree_bytes=6000))
    assert over_tree.value.reason is Refusal.TREE
    # Within bounds, both are held.
    assert take(one, PROVIDER, 1, 1, limits=Limits(file_bytes=4096, tree_bytes=9000)).tree.held > 8192


def test_fifos_and_sockets_are_kept_and_restored_with_their_modes(tmp_path: Path) -> None:
    """W1: a FIFO (and a socket) the agent made was dropped from the snapshot: the restored case
    saw "no such file" where a real kill sees the FIFO."""
    one = case_tree(tmp_path)
    os.mkfifo(one / "ws" / "fifo", 0o600)
    os.chmod(one / "ws" / "fifo", 0o640)
    os.mknod(one / "ws" / "sock", stat.S_IFSOCK | 0o600)
    os.chmod(one / "ws" / "sock", 0o751)
    snap = take(one, PROVIDER, 1, 2)
    restore(snap, tmp_path / B)
    fifo, sock = (os.lstat(tmp_path / B / "ws" / n) for n in ("fifo", "sock"))
    assert stat.S_ISFIFO(fifo.st_mode)
    assert stat.S_IMODE(fifo.st_mode) == 0o640
    assert stat.S_ISSOCK(sock.st_mode)
    assert stat.S_IMODE(sock.st_mode) == 0o751
    assert key(tmp_path / B, PROVIDER) == key(one, PROVIDER)
    (one / "ws" / "fifo").unlink()
    assert key(tmp_path / B, PROVIDER) != key(one, PROVIDER), "the key sees a FIFO"


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_node_refuses_the_state(tmp_path: Path) -> None:
    one = case_tree(tmp_path)
    os.mknod(one / "ws" / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(Refused) as refused:
        take(one, PROVIDER, 1, 1)
    assert refused.value.reason is Refusal.DEVICE


def test_an_unchanged_file_is_one_object_from_event_to_event(tmp_path: Path) -> None:
    one = case_tree(tmp_path)
    (one / "ws" / "big.bin").write_bytes(b"z" * 100_000)
    first = take(one, PROVIDER, 1, 1)
    (one / "ws" / "note").write_text("new", encoding="utf-8")
    second = take(one, PROVIDER, 1, 2, previous=first)
    assert second.tree is not first.tree
    assert second.tree.files()["ws/big.bin"] is first.tree.files()["ws/big.bin"]
    assert second.tree.fresh == 3, "only the new file's bytes are new"
    assert second.tree.held == first.tree.held + 3


def test_data_equality_is_by_size_and_extents() -> None:
    assert Data(10, ((0, b"ab"),)) == Data(10, ((0, b"ab"),))
    assert Data(10, ((0, b"ab"),)) != Data(11, ((0, b"ab"),))
    assert Data(10, ((0, b"ab"),)) != Data(10, ((4, b"ab"),))
