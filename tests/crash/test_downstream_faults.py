"""Our agent under every downstream fault: a keyed or queryable service applies each operation once."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.crash
FAULTS = ("reply-lost", "kill-after-apply", "error-after-apply", "error-before-apply", "timeout")
APPLIED = re.compile(r"^ +#\d+ inc\d+ (\w+) POST \S+ key=\S+ -> \S+(?: reply)? applied (op_\d+)", re.M)


def crashmatrix(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crashmatrix", *args], capture_output=True, text=True,
                          timeout=600, check=False, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize(("case", "services"), [
    ("email-keyed/d01:create:mail", {"mail"}),  # keyed: a re-send is a replay
    ("email-by-reference/d01:create:mail", {"mail"}),  # no key: asked before any re-send
    ("order-then-email/d02:create:mail", {"shop", "mail"}),  # the second service of a chain
])
def test_each_service_applies_one_operation_under_every_downstream_fault(
        case: str, services: set[str], fault: str) -> None:
    proc = crashmatrix("repro", f"{case}/{fault}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "every invariant held" in proc.stdout
    # The fault acted where the case id says (the timeline and the service's record name it).
    assert f"[fault {fault}]" in proc.stdout, proc.stdout[-3000:]
    applied = APPLIED.findall(proc.stdout)
    assert sorted(service for service, _ in applied) == sorted(services), proc.stdout[-3000:]
    if fault == "kill-after-apply":
        assert "XX SIGKILL at kill-after-apply at downstream request" in proc.stdout


def test_the_downstream_scenarios_hold_on_every_case(tmp_path: Path) -> None:
    proc = crashmatrix("run", "--scenario", "email-keyed", "--scenario", "email-by-reference",
                       "--scenario", "order-then-email", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ids = (tmp_path / "results.jsonl").read_text(encoding="utf-8")
    for fault in FAULTS:  # each downstream fault was enumerated at the requests
        assert f"email-keyed/d01:create:mail/{fault}" in ids
    assert "order-then-email/d02:create:mail/timeout" in ids
    assert "email-by-reference/d02:status:mail/reply-lost" not in ids  # no query when all went well
