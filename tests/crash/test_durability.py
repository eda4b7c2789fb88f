"""docs/durability.md is what `crashmatrix durability` writes: a fast slice of its agents is run
again and their rows, repro lines and reasons must be the committed page's, word for word (but
the version column: a patch release of a framework is not a stale page). A page crashmatrix did
not write is never overwritten."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.frameworks import ROOT, crashmatrix

pytestmark = pytest.mark.crash
PAGE = ROOT / "docs" / "durability.md"
# Fast, and all three kinds of row: the reference (every promise held, power and second judged),
# the baseline (violated), and an integration (violated; power and second not applicable).
SLICE = ("durable-agent", "messages-only", "microsoft-agent-framework")
VERSION_COLUMN = 3  # | agent | framework | version | ...


def _rows(page: str, agents: tuple[str, ...]) -> dict[str, list[str]]:
    """agent -> its table row's cells (version blanked) and the lines below naming it."""
    out: dict[str, list[str]] = {a: [] for a in agents}
    for line in page.splitlines():
        for a in agents:
            if line.startswith(f"| `{a}` |"):
                cells = line.split(" | ")
                cells[VERSION_COLUMN - 1] = "(version)"
                out[a].append(" | ".join(cells))
            elif line.startswith(f"- `{a}`,"):
                out[a].append(line)
    return out


def test_the_committed_page_is_what_the_command_writes(tmp_path: Path) -> None:
    committed = PAGE.read_text(encoding="utf-8")
    assert "<!-- written by `crashmatrix durability`" in committed
    assert "Written by `crashmatrix durability --write docs/durability.md`" in committed
    for agent in ("langgraph", "openai-agents", "langgraph-js", "openai-agents-js", "pydantic-ai-dbos",
                  "microsoft-agent-framework"):
        assert f"| `{agent}` |" in committed, f"{agent} has no row"
    args = [a for agent in SLICE for a in ("--agent", agent)]
    done = crashmatrix("durability", *args, "--out", str(tmp_path / "out"), "--write",
                       str(tmp_path / "page.md"), cwd=ROOT, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    fresh = (tmp_path / "page.md").read_text(encoding="utf-8")
    assert _rows(fresh, SLICE) == _rows(committed, SLICE), (
        "docs/durability.md is stale: run `crashmatrix durability --write docs/durability.md`")
    assert all(_rows(fresh, SLICE).values())


def test_a_page_crashmatrix_did_not_write_is_refused_and_kept(tmp_path: Path) -> None:
    mine = tmp_path / "notes.md"
    mine.write_text("# my notes\n", encoding="utf-8")
    done = crashmatrix("durability", "--agent", "durable-agent", "--out", str(tmp_path / "out"),
                       "--write", str(mine), cwd=ROOT, env={**os.environ})
    assert done.returncode == 2
    assert f"--write {mine}: the file exists and no line in it says crashmatrix durability wrote it" \
        in done.stderr
    assert mine.read_text(encoding="utf-8") == "# my notes\n"
    assert not (tmp_path / "out").exists(), "refused before anything ran"


def test_the_readme_links_the_table() -> None:
    assert "docs/durability.md" in (ROOT / "README.md").read_text(encoding="utf-8")
