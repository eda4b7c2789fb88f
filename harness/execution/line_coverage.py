"""Combines the recovery incarnations' coverage data into one HTML report of the agent's code."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import coverage

# The data file of the agent's import-time lines, measured once by the zygote as it preloads
# the agent (the `.coverage.` prefix: combined with the recoveries' own files).
IMPORTS_DATA = ".coverage.imports"


@dataclass(frozen=True)
class LineCoverage:
    percent: float
    files: int
    html_dir: Path
    data_files: int


def combine_and_report(data_dir: Path, out_dir: Path) -> LineCoverage | None:
    """Combine `.coverage.*` files in data_dir; write HTML to out_dir/coverage. None if no data."""
    data_files = sorted(data_dir.glob(".coverage.*"))
    recoveries = [p for p in data_files if p.name != IMPORTS_DATA]
    if not recoveries:  # the imports alone say nothing of recovery
        return None
    cov = coverage.Coverage(data_file=str(out_dir / ".coverage"), branch=True)
    cov.combine([str(p) for p in data_files], keep=False)
    cov.save()
    html_dir = out_dir / "coverage"
    percent = cov.html_report(directory=str(html_dir),
                              title="crashmatrix: agent code run by recovery incarnations")
    return LineCoverage(percent=round(percent, 1), files=len(cov.get_data().measured_files()),
                        html_dir=html_dir, data_files=len(recoveries))
