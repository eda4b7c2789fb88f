"""Exploration: Hypothesis-generated scenarios and crash schedules, shrunk failures, repro files."""

from crashmatrix.harness.explore.repro import (
    Repro,
    ReproFileError,
    load_repro_file,
    read_repro,
    repro_command,
    run_repro,
)

__all__ = ["Repro", "ReproFileError", "load_repro_file", "read_repro", "repro_command",
           "run_repro"]
