"""Whether a mode that crashes an agent at its system calls (`--black-box`, `--syscalls`) can run it."""

from __future__ import annotations

from crashmatrix.harness.adapters.interface import Adapter, Capability
from crashmatrix.harness.cli.exitcodes import Exit, fail
from crashmatrix.harness.execution.fs_trace import TracerMissing, strace_path
from crashmatrix.harness.faults.interface import at_store_calls_of, at_syscall_points_of
from crashmatrix.harness.faults.registry import FAULTS


def black_box_usable(adapter: Adapter, selected: tuple[str, ...] | None, depth: int) -> None:
    """--black-box needs strace (exit 3), an agent whose store is files in its session directory,
    a fault that can act at a store call, and depth 1 (exit 2 naming what is wrong)."""
    if Capability.FILE_STORE not in adapter.capabilities:
        fail(f"--black-box crashes an agent at its calls on the store files in its session directory; "
             f"agent {adapter.name!r} does not declare 'file-store' (its store is elsewhere)")
    if selected is not None:
        unusable = [f.name for f in FAULTS.all() if f.name in selected and not at_store_calls_of(f)]
        if unusable:
            fail(f"--black-box: --fault {', '.join(unusable)} cannot act at a store call (black-box "
                 "points take: " + ", ".join(f.name for f in FAULTS.all() if at_store_calls_of(f)) + ")")
    if depth > 1:
        fail("--black-box: --depth 1 only (a black-box matrix crashes the first incarnation once; "
             "deeper black-box schedules are not built yet)")
    try:
        strace_path()
    except TracerMissing as exc:
        fail(f"--black-box: {exc}", Exit.HARNESS)


def syscalls_problem(adapter: Adapter, selected: tuple[str, ...] | None) -> tuple[str, Exit] | None:
    """Why --syscalls cannot run this agent with these faults, and the exit code it means (None:
    it can): strace missing (3); a store that is not files in the session directory, or no
    selected fault that can act at a store call (2)."""
    if Capability.FILE_STORE not in adapter.capabilities:
        return (f"--syscalls crashes an agent at its calls on the store files in its session directory; "
                f"agent {adapter.name!r} does not declare 'file-store' (its store is elsewhere)", Exit.USAGE)
    if selected is not None and not any(at_syscall_points_of(f) for f in FAULTS.all() if f.name in selected):
        return ("--syscalls: none of the selected faults can act at a system call (those that can: "
                + ", ".join(f.name for f in FAULTS.all() if at_syscall_points_of(f)) + ")", Exit.USAGE)
    try:
        strace_path()
    except TracerMissing as exc:
        return f"--syscalls: {exc}", Exit.HARNESS
    return None


def syscalls_usable(adapter: Adapter, selected: tuple[str, ...] | None) -> None:
    """--syscalls can run (`syscalls_problem`), or the command exits naming what is wrong."""
    problem = syscalls_problem(adapter, selected)
    if problem is not None:
        fail(*problem)
