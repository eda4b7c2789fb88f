"""A malformed probe line is the case's verdict (liveness), never the harness's death (issue 33, L2, M4)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from crashmatrix.harness.execution.incarnation import (
    MAX_PROBE_LINE,
    Incarnation,
    IncarnationProtocolError,
)
from crashmatrix.harness.execution.spawn import Launch

pytestmark = pytest.mark.crash
GOOD = b'{"n": 1, "kind": "commit.before", "label": "x"}\n'
# Writes its lines to the probe channel, then waits for the harness (which kills it).
# An argument `*N` stands for N bytes of "x" (too long for a command line as hex).
AGENT = ("import os, sys, time\nw = int(os.environ['CRASHMATRIX_PROBE'][3:].split(',')[1])\n"
         "for line in sys.argv[1:]:\n"
         "    os.write(w, b'x' * int(line[1:]) if line[0] == '*' else bytes.fromhex(line))\n"
         "time.sleep(60)\n")


def launched(tmp_path: Path, *lines: bytes | int) -> Incarnation:
    args = [f"*{line}" if isinstance(line, int) else line.hex() for line in lines]
    return Incarnation(Launch(program=(sys.executable, "-c", AGENT), entry=None, args=args, cwd=tmp_path,
                              env={"PATH": os.environ.get("PATH", "")}))


@pytest.mark.parametrize(("line", "says"), [
    (b"not json\n", "is not UTF-8 JSON"),
    (b"\xff\xfe{}\n", "is not UTF-8 JSON"),
    (b'{"kind": "a\xc3(", "label": "x"}\n', "is not UTF-8 JSON"),  # bad UTF-8 inside a string
    (b'["kind", "label"]\n', "not an object with a string kind and label"),
    (b'{"label": "x"}\n', "not an object with a string kind and label"),
    (b'{"kind": 3, "label": "x"}\n', "not an object with a string kind and label"),
    (b'{"kind": "a", "label": "x", "detail": [1]}\n', "detail is not an object"),
    (b'{"kind": "commit.before", "label": "a+b"}\n', "holds a character case ids reserve"),
    (b'{"kind": "commit:before", "label": "x"}\n', "holds a character case ids reserve"),
])
def test_a_bad_line_is_a_protocol_error_naming_it(tmp_path: Path, line: bytes, says: str) -> None:
    with launched(tmp_path, GOOD, line) as inc:
        assert inc.next_event(time.monotonic() + 10) is not None  # the good line first
        with pytest.raises(IncarnationProtocolError, match=f"probe line 2.*{says}"):
            inc.next_event(time.monotonic() + 10)


def test_a_line_without_end_is_refused_once_past_the_cap(tmp_path: Path) -> None:
    # Sent in one write of a bit more than the cap: the harness stops reading there.
    with launched(tmp_path, MAX_PROBE_LINE + 70_000) as inc, \
            pytest.raises(IncarnationProtocolError, match="without a newline"):
        inc.next_event(time.monotonic() + 20)
