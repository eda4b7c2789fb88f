"""The bench's bytecode handling: fresh mode is not charged for compiling when bytecode is off."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crashmatrix.harness.cli.bench import cached_bytecode


def _package(root: Path) -> None:
    (root / "benchpkg").mkdir()
    (root / "benchpkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "benchpkg" / "mod.py").write_text("def f() -> int:\n    return 2\n")


def test_with_bytecode_off_the_agents_may_cache_it_and_the_package_is_compiled_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    with cached_bytecode("benchpkg") as intervened:
        assert intervened
        assert "PYTHONDONTWRITEBYTECODE" not in os.environ
        compiled = sorted(p.name.split(".")[0] for p in tmp_path.rglob("benchpkg/__pycache__/*.pyc"))
        assert compiled == ["__init__", "mod"]
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1"


def test_the_environment_is_restored_when_the_block_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    with pytest.raises(RuntimeError), cached_bytecode("no_such_package_here"):
        raise RuntimeError("boom")
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1"


def test_with_bytecode_on_it_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    before = dict(os.environ)
    with cached_bytecode("crashmatrix.agent") as intervened:
        assert not intervened
        assert dict(os.environ) == before
