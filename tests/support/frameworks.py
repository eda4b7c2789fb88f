"""What the framework integrations' crash tests share: the CLI, verdicts, connections seen by strace."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "crashmatrix"]
# One connect() in `strace -e trace=connect` output: its address family and the rest of the address.
CONNECT = re.compile(r"connect\(\d+, \{sa_family=(AF_\w+)(.*?)\}")

Verdicts = dict[str, tuple[str, list[str]]]  # case id -> (verdict, violated invariants)


def crashmatrix(*args: str, cwd: Path, env: dict[str, str] | None = None,
                timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def verdicts(out: Path) -> Verdicts:
    """case id -> (verdict, violated invariants), from a run's results.jsonl."""
    found = {}
    for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        found[r["case"]] = (r["verdict"], sorted({v["invariant"] for v in r["violations"]}))
    return found


def outside_loopback(seen: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(the internet connections, those not to 127.0.0.1) among CONNECT matches."""
    inet = [(family, rest) for family, rest in seen if family in ("AF_INET", "AF_INET6")]
    return inet, [(family, rest) for family, rest in inet if 'inet_addr("127.0.0.1")' not in rest]
