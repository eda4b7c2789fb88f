"""A network-probing agent for issue 33's S2: the messages-only agent, which in its first
incarnation also writes what network it sees to a file outside the case tree: its network
namespace, its interfaces, and what a connect to a port the test listens on, on the test's own
loopback, gives. It sends nothing anywhere else.

    crashmatrix run --agent tests.support.netprobe:ADAPTER
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

from crashmatrix.agent import messages_only
from crashmatrix.harness.adapters.baseline import MessagesOnlyAdapter
from crashmatrix.harness.adapters.interface import PythonEntry, python_program

SEEN_ENV = "CRASHMATRIX_NETPROBE_SEEN"  # where to write what it saw
PORT_ENV = "CRASHMATRIX_NETPROBE_PORT"  # a port the test listens on, on its loopback
ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.support.netprobe"


def seen() -> dict[str, object]:
    try:
        with socket.create_connection(("127.0.0.1", int(os.environ[PORT_ENV])), timeout=2):
            reached = "connected"
    except OSError as exc:
        reached = type(exc).__name__
    return {"netns": os.readlink("/proc/self/ns/net"),
            "interfaces": sorted(name for _, name in socket.if_nameindex()),
            "test_port": reached}


def main(argv: list[str]) -> int:
    if argv and argv[0] == "run":
        Path(os.environ[SEEN_ENV]).write_text(json.dumps(seen()), encoding="utf-8")
    return messages_only.main(argv)


class NetprobeAdapter(MessagesOnlyAdapter):
    name = "netprobe"
    program = python_program(MODULE)
    python: PythonEntry | None = None  # fresh processes: `tests` is not the zygote's to import
    pass_env = (SEEN_ENV, PORT_ENV)

    def env(self) -> dict[str, str]:
        return {"PYTHONPATH": str(ROOT)}


ADAPTER = NetprobeAdapter()

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
