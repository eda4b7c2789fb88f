"""at-most-once against the world, with our agent and real kills: an oracle that names only some of
a tool's effects cannot vouch for the calls it cannot tell apart, so their repeats are judged from
the probes; every flagged case is one whose file really holds a line twice, counted here."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from crashmatrix.harness.execution.runner import case_dir_name
from crashmatrix.harness.records.case import Case

pytestmark = pytest.mark.crash

TWO_SENDS = """
description = "two sends by a tool declared idempotent; the oracle names only ana's"
task = "Email ana and bob."
[tools]
enabled = ["bash"]
policies = { bash = "idempotent" }
[[script]]
name = "ana"
when = { turns = 0 }
reply.tool_calls = [{ tool = "bash", args = { command = "echo 'to=ana' >> outbox.txt" } }]
[[script]]
name = "bob"
when = { turns = 1 }
reply.tool_calls = [{ tool = "bash", args = { command = "echo 'to=bob' >> outbox.txt" } }]
[[script]]
name = "done"
reply.final = "done"
[[expect.patterns]]
path = "outbox.txt"
pattern = "^to=ana$"
tool = "bash"
min = 1
"""


def test_a_partial_oracle_leaves_the_repeats_it_cannot_attribute_to_the_probes(tmp_path: Path) -> None:
    (tmp_path / "two_sends.toml").write_text(TWO_SENDS, encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "crashmatrix", "run", "--scenarios", str(tmp_path),
                           "--scenario", "two_sends", "--fault", "kill", "--keep", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, proc.stderr[-2000:]
    doubled, flagged = set(), set()
    for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        result = json.loads(line)
        outbox = out / "cases" / case_dir_name(Case.parse(result["case"])) / "ws" / "outbox.txt"
        sent = Counter(outbox.read_text(encoding="utf-8").splitlines()) if outbox.exists() else Counter()
        if any(n > 1 for n in sent.values()):
            doubled.add(result["case"])
        found = [v for v in result["violations"] if v["invariant"] == "at-most-once"]
        if found:
            flagged.add(result["case"])
            assert len(found) == 1, found  # one report per double, not one per view of it
            assert "judged from effect probes alone" in found[0]["message"]
    # Our agent re-runs a call it was told is safe to re-run: ana's and bob's sends each doubled
    # somewhere, and every such case, and only those, is flagged.
    assert doubled
    assert flagged == doubled
