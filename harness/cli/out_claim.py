"""Whose `--out` it is: the files `run` and `merge` write there, and the refusal of a folder whose
result files crashmatrix did not write (exit 2; nothing in it touched)."""

from __future__ import annotations

import json
from pathlib import Path

from crashmatrix.harness.cli.exitcodes import fail
from crashmatrix.harness.records.results import RESULTS_FILE
from crashmatrix.harness.records.run_record import RUN_FILE
from crashmatrix.reports.write import ReportFile

DEFAULT_OUT = "crashmatrix-out"


# What crashmatrix writes into --out; other files there are never touched.
OUR_FILES = (RESULTS_FILE, RUN_FILE, *(f.value for f in ReportFile), "coverage", "coverage-data",
             "cases")


def claim_out(out_dir: Path, overwrite: bool) -> None:
    """Refuse an --out whose result files some other program (or person) wrote: only a directory
    holding a run.json of ours, or none of our file names, is ours to write into."""
    present = [name for name in OUR_FILES if (out_dir / name).exists()] if out_dir.is_dir() else []
    if overwrite or not present or _is_our_run_file(out_dir / RUN_FILE):
        return
    fail(f"--out {out_dir}: it already holds {', '.join(present)}, and no run.json says crashmatrix "
         "wrote them; choose another --out, or pass --overwrite to replace them")


def _is_our_run_file(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and {"agent", "declared_branches"} <= set(data)
