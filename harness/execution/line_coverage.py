"""Combines the recovery incarnations' coverage data into one HTML report of the agent's code."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

# The data file of the agent's import-time lines, measured once by the zygote as it preloads
# the agent (the `.coverage.` prefix: combined with the recoveries' own files).
IMPORTS_DATA = ".coverage.imports"


@dataclass(frozen=True)
class LineCoverage:
    percent: float
    files: int
    html_dir: Path
    data_files: int
    source: str | None = None  # what was measured, as the user would name it


class Nothing(StrEnum):
    SAVED = "saved"  # no recovery incarnation saved coverage data
    OF_SOURCE = "of-source"  # recoveries saved data, but none of it is of the source measured


@dataclass(frozen=True)
class Unmeasured:
    """Why `--line-coverage` measured nothing: said to the user, never a silent gap."""

    why: Nothing
    source: str | None = None
    data_files: int = 0

    @property
    def message(self) -> str:
        if self.why is Nothing.SAVED:
            return ("no recovery incarnation saved coverage data: each recovery was killed or ended "
                    "without Python's normal exit (os._exit, a signal), so coverage.py never saved, "
                    "or the matrix had no recovery that ran to its end")
        source = self.source or "the measured source"
        return (f"{self.data_files} recovery incarnation(s) saved coverage data, but no file of "
                f"{source} was measured: the agent's code is not there; --line-coverage-source "
                "names the package or directory the agent's code is really in")


def combine_and_report(data_dir: Path, out_dir: Path,
                       source: str | None = None) -> LineCoverage | Unmeasured:
    """Combine `.coverage.*` files in data_dir; write HTML to out_dir/coverage. `source`: what was
    measured, as the user names it (said in the result). Unmeasured, with why, when nothing was."""
    data_files = sorted(data_dir.glob(".coverage.*"))
    recoveries = [p for p in data_files if p.name != IMPORTS_DATA]
    if not recoveries:  # the imports alone say nothing of recovery
        return Unmeasured(Nothing.SAVED, source)
    # Imported here: only --line-coverage needs coverage.py (0.03 s of every start otherwise).
    import coverage  # noqa: PLC0415
    from coverage.exceptions import NoDataError  # noqa: PLC0415

    cov = coverage.Coverage(data_file=str(out_dir / ".coverage"), branch=True)
    try:
        cov.combine([str(p) for p in data_files], keep=False)
        cov.save()
        measured = len(cov.get_data().measured_files())
        if not measured:  # html_report would raise NoDataError; say what that means here
            return Unmeasured(Nothing.OF_SOURCE, source, len(recoveries))
        html_dir = out_dir / "coverage"
        percent = cov.html_report(directory=str(html_dir),
                                  title="crashmatrix: agent code run by recovery incarnations")
    except NoDataError:  # nothing to combine, or nothing left to report: still nothing of source
        return Unmeasured(Nothing.OF_SOURCE, source, len(recoveries))
    return LineCoverage(percent=round(percent, 1), files=measured, html_dir=html_dir,
                        data_files=len(recoveries), source=source)
