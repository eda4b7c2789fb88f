"""A planted nondeterministic agent for `--audit-states`: the messages-only baseline whose recovery
reads a counter kept outside its case tree, and on every second recovery appends a line of its own.

Its adapter still declares `state-in-tree` (the lie the audit is there to catch): started from a
crash state, a case's recovery sees one count; run again as a real kill, the next.

    crashmatrix run --agent tests.support.planted:ADAPTER --states --audit-states 1
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from crashmatrix.agent import messages_only
from crashmatrix.harness.adapters.baseline import MessagesOnlyAdapter
from crashmatrix.harness.adapters.interface import PythonEntry, python_program

COUNTER_ENV = "CRASHMATRIX_PLANTED_COUNTER"  # the file outside every case tree
ROOT = Path(__file__).resolve().parents[2]  # where `tests` is importable from
MODULE = "tests.support.planted"


def main(argv: list[str]) -> int:
    if argv and argv[0] == "recover":
        counter = Path(os.environ[COUNTER_ENV])
        count = int(counter.read_text(encoding="ascii") or "0") + 1 if counter.exists() else 1
        counter.write_text(str(count), encoding="ascii")
        if count % 2 == 0:
            with (Path(argv[2]) / "CHANGELOG.md").open("a", encoding="utf-8") as f:
                f.write("planted\n")
    return messages_only.main(argv)


class PlantedAdapter(MessagesOnlyAdapter):
    name = "planted"
    program = python_program(MODULE)
    python: PythonEntry | None = None  # fresh processes: `tests` is not the zygote's to import

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(ROOT)}


ADAPTER = PlantedAdapter()

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
