"""strace's system-call injection: options making one call on one file fail, and whether it did. Pure.

`-P PATH` restricts both what is traced and what `when=N` counts to calls on that file, so N is
the file's N-th call of that syscall in the incarnation (a sync of its folder, a write of another
file do not count). An injected call is not executed: `error=` returns that errno, `retval=` that
value, with nothing done; strace marks its line `(INJECTED)`. strace can neither run a call and
then change what it returns nor change a call's arguments (its count), so a short write that
really wrote a prefix is not something it can make: `short-write` skips the call with a short
count and puts the prefix back afterwards, from the buffer strace printed
(harness/faults/short_write.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

INJECTED_MARK = "(INJECTED)"
# The bytes of a write's buffer strace prints (`-s`): a short write's prefix is taken from them,
# so it is at most this long.
SHOWN = 64


def inject_args(path: Path, syscall: str, how: str, when: int) -> list[str]:
    """strace options (before `--`) making the `when`-th `syscall` on `path` do `how`
    (`error=EIO`, `retval=16`); signals are not traced (only the file's calls are wanted)."""
    if when < 1:
        raise ValueError(f"when={when}: calls are counted from 1")
    return ["-e", "signal=none", "-s", str(SHOWN), "-P", str(path),
            "-e", f"inject={syscall}:{how}:when={when}"]


def injected(lines: Iterable[str]) -> bool:
    """Whether strace's output shows an injected call."""
    return any(line.rstrip().endswith(INJECTED_MARK) for line in lines)
