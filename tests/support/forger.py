"""A forger for issue 33's S4: the messages-only agent, which in its first incarnation also posts
to the fake provider under its own case's predictable key (the case directory's name, a hash of
the case id that any local process can compute) and writes the HTTP status it got to a file
outside the case tree. A live case answering there would mean any local process could answer,
or mislead, any case's agent.

    crashmatrix run --agent tests.support.forger:ADAPTER
"""

from __future__ import annotations

import http.client
import json
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from crashmatrix.agent import messages_only
from crashmatrix.harness.adapters.baseline import MessagesOnlyAdapter
from crashmatrix.harness.adapters.interface import PythonEntry, python_program

STATUS_ENV = "CRASHMATRIX_FORGER_STATUS"  # a file outside every case tree: one status per line
ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.support.forger"


def forge(session: Path, url: str) -> int:
    """The status a POST to the guessable key of this case gets."""
    guess = session.parent.name  # the case directory: what the key used to be
    where = urlsplit(url)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "say done"}]})
    conn = http.client.HTTPConnection(where.hostname or "127.0.0.1", where.port, timeout=5)
    try:
        conn.request("POST", f"/{guess}/v1/chat/completions", body, {"Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()


def main(argv: list[str]) -> int:
    if argv and argv[0] == "run":
        status = forge(Path(argv[1]), argv[3])
        with Path(os.environ[STATUS_ENV]).open("a", encoding="ascii") as f:
            f.write(f"{status}\n")
    return messages_only.main(argv)


class ForgerAdapter(MessagesOnlyAdapter):
    name = "forger"
    program = python_program(MODULE)
    python: PythonEntry | None = None  # fresh processes: `tests` is not the zygote's to import
    pass_env = (STATUS_ENV,)

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(ROOT)}


ADAPTER = ForgerAdapter()

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
