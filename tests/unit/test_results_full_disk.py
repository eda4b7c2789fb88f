"""L4: a full disk while results are written leaves whole lines only, names the file, and a
results file whose last line a stopped run tore is still read (report) and continued (resume)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from crashmatrix.harness.records import results as results_module
from crashmatrix.harness.records.atomic import replace_file
from crashmatrix.harness.records.results import CaseResult, ResultsWriter, Verdict, load


def _result(case: str) -> CaseResult:
    return CaseResult(case=case, scenario=case.split("/", maxsplit=1)[0], depth=1, verdict=Verdict.PASS,
                      repro=f"crashmatrix repro {case}")


def test_a_line_the_disk_has_no_room_for_is_taken_back_and_the_file_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "results.jsonl"
    writer = ResultsWriter(path)
    writer.write(_result("a/01:x:y/kill"))
    writer.write(_result("a/02:x:y/kill"))
    real = os.pwrite

    def full(fd: int, data: bytes, offset: int) -> int:
        # As a filling disk does: some bytes of the line land, then no more room.
        if len(data) > 10:
            real(fd, data[:10], offset)
            return 10
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(results_module.os, "pwrite", full)
    with pytest.raises(OSError, match="No space left") as caught:
        writer.write(_result("a/03:x:y/kill"))
    monkeypatch.setattr(results_module.os, "pwrite", real)
    writer.close()
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(path)
    assert path.read_bytes().endswith(b"}\n")
    assert [r.case for r in load(path)] == ["a/01:x:y/kill", "a/02:x:y/kill"]


def test_a_torn_last_line_is_no_result_and_a_resumed_writer_cuts_it(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    writer = ResultsWriter(path)
    writer.write(_result("a/01:x:y/kill"))
    writer.close()
    with path.open("ab") as f:
        f.write(b'{"case": "a/02:x:y/kill", "verdi')  # a run stopped mid-line (older versions)
    assert [r.case for r in load(path)] == ["a/01:x:y/kill"]
    resumed = ResultsWriter(path, append=True)
    resumed.write(_result("a/02:x:y/kill"))
    resumed.close()
    assert [r.case for r in load(path)] == ["a/01:x:y/kill", "a/02:x:y/kill"]


def test_a_whole_last_result_without_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    writer = ResultsWriter(path)
    writer.write(_result("a/01:x:y/kill"))
    writer.close()
    path.write_bytes(path.read_bytes().rstrip(b"\n"))  # a hand edit dropped the newline
    resumed = ResultsWriter(path, append=True)
    resumed.write(_result("a/02:x:y/kill"))
    resumed.close()
    assert [r.case for r in load(path)] == ["a/01:x:y/kill", "a/02:x:y/kill"]


def test_an_atomic_replace_on_a_full_disk_names_its_file_and_leaves_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text("old\n")

    def chunks() -> object:
        yield "new"
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(OSError, match="No space left") as caught:
        replace_file(path, chunks())  # type: ignore[arg-type]
    assert caught.value.filename == str(path)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
