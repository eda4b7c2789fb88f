"""The audit compares contents, not counts alone: kinds, modes and bytes at the crash, the final workspace."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from crashmatrix.harness.execution.audit import Contents, compared
from crashmatrix.harness.execution.snapshot_audit import contents
from crashmatrix.harness.records.results import CaseResult, Verdict

A = "tree-0123456789ab"
B = "tree-ba9876543210"


def case_tree(root: Path, name: str) -> Path:
    case_dir = root / name
    (case_dir / "session").mkdir(parents=True)
    (case_dir / "ws").mkdir()
    url = f"http://127.0.0.1:1/{name}-{os.urandom(8).hex()}/v1"
    (case_dir / "session" / "config.json").write_text(f'{{"ws": "/x/{name}/ws", "url": "{url}"}}',
                                                      encoding="utf-8")
    (case_dir / "ws" / "CHANGELOG.md").write_text("# Changelog\n", encoding="utf-8")
    os.mkfifo(case_dir / "ws" / "fifo")
    return case_dir


def test_the_audit_reader_masks_the_case_directory_and_sees_kinds_modes_and_bytes(tmp_path: Path) -> None:
    one, two = case_tree(tmp_path, A), case_tree(tmp_path, B)
    assert contents(one) == contents(two), "the name and the case key are masked"
    assert contents(one)["ws/fifo"].startswith("fifo ")
    (two / "ws" / "fifo").unlink()
    assert "ws/fifo" not in contents(two)
    os.mkfifo(two / "ws" / "fifo", 0o600)
    os.chmod(two / "ws" / "fifo", 0o600)
    os.chmod(one / "ws" / "fifo", 0o644)
    assert contents(one)["ws/fifo"] != contents(two)["ws/fifo"], "a mode"
    os.chmod(two / "ws" / "fifo", 0o644)
    (two / "ws" / "CHANGELOG.md").write_text("# Changelog!\n", encoding="utf-8")
    assert contents(one) != contents(two), "a byte"


def test_holes_and_written_zeros_are_the_same_bytes_and_cost_no_read(tmp_path: Path) -> None:
    one, two = case_tree(tmp_path, A), case_tree(tmp_path, B)
    size = 8 << 20
    with open(one / "ws" / "big.bin", "wb") as f:
        f.truncate(size)
        f.seek(size // 2 + 5)
        f.write(f"/x/{A}/ws".encode())
    with open(two / "ws" / "big.bin", "wb") as f:
        f.write(bytes(size // 2 + 5) + f"/x/{B}/ws".encode())
        f.write(bytes(size - f.tell()))
    assert contents(one)["ws/big.bin"] == contents(two)["ws/big.bin"]
    with open(two / "ws" / "big.bin", "r+b") as f:
        f.seek(100)
        f.write(b"\1")
    assert contents(one)["ws/big.bin"] != contents(two)["ws/big.bin"]


def test_a_state_that_dropped_a_fifo_is_found_by_its_contents_though_every_count_agrees() -> None:
    """W1: the audit compared counts; a restored state without the agent's FIFO gave the same
    counts as a real kill, and went unnoticed."""
    base = CaseResult(case="tree-0/04:commit.after:x/kill", scenario="tree-0", depth=1,
                      verdict=Verdict.PASS, commits=5, requests=3, exit_codes=[None, 0, 0])
    left = {"ws": "dir 755", "ws/CHANGELOG.md": "file 644 12 ab", "ws/fifo": "fifo 644"}
    restored = {k: v for k, v in left.items() if k != "ws/fifo"}
    workspace = {"CHANGELOG.md": "# Changelog\n", "fifo": "<fifo: not read>"}
    assert compared(base, base, Contents(left, workspace), Contents(left, workspace)) is base
    got = compared(base, base, Contents(restored, workspace), Contents(left, workspace))
    assert got.verdict is Verdict.NONDETERMINISTIC
    assert got.note is not None
    assert "tree at the crash ws/fifo: restored absent, as the agent left it 'fifo 644'" in got.note
    assert "is not the tree a real kill leaves" in got.note
    lost = {k: v for k, v in workspace.items() if k != "fifo"}
    later = compared(base, base, Contents(None, lost), Contents(None, workspace))
    assert later.verdict is Verdict.NONDETERMINISTIC
    assert later.note is not None
    assert "final workspace fifo" in later.note
    assert "depends on something outside the case tree" in later.note
    counted = compared(base, dataclasses.replace(base, commits=6), Contents(left, workspace),
                       Contents(left, workspace))
    assert counted.note is not None
    assert "commits: from the state 5, real kill 6" in counted.note
