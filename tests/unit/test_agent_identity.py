"""Which distribution installed an adapter's module: the fast lookup by name agrees with the full scan."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.adapters.identity import _distribution, _editable_holds, _named_alike


def test_the_lookup_by_name_finds_only_a_distribution_the_full_scan_finds_too() -> None:
    scanned = importlib.metadata.packages_distributions()
    found = {top: _named_alike(top) for top in scanned}
    disagree = {top: (got, scanned[top]) for top, got in found.items() if got and got[0] not in scanned[top]}
    assert disagree == {}
    assert _named_alike("crashmatrix.harness.adapters.durable") == ["crashmatrix"]
    # A package its distribution is not named after is left to the scan.
    assert found["_pytest"] == []
    assert _distribution("_pytest.main") == f"pytest {importlib.metadata.version('pytest')}"
    assert _distribution("crashmatrix.harness.adapters.durable") == \
        f"crashmatrix {importlib.metadata.version('crashmatrix')}"


@pytest.mark.skipif(importlib.util.find_spec("langgraph.prebuilt") is None,
                    reason="the langgraph extra is not installed")
def test_a_top_package_several_distributions_share_is_credited_to_the_one_holding_the_module() -> None:
    # langgraph, langgraph-prebuilt and the checkpoint distributions all install under langgraph/.
    assert _named_alike("langgraph.graph") == ["langgraph"]
    assert _named_alike("langgraph.prebuilt") == []
    assert _distribution("langgraph.prebuilt") == \
        f"langgraph-prebuilt {importlib.metadata.version('langgraph-prebuilt')}"


def test_a_module_no_distribution_installed_has_none() -> None:
    assert _named_alike("no_such_package_anywhere") == []
    assert _distribution("no_such_package_anywhere.adapter") is None


class _Installed(importlib.metadata.Distribution):
    """A distribution whose direct_url.json says how (and from where) it was installed."""

    def __init__(self, direct_url: dict[str, object]) -> None:
        self.direct_url = direct_url

    def read_text(self, filename: str) -> str | None:
        return json.dumps(self.direct_url) if filename == "direct_url.json" else None

    def locate_file(self, path: str | os.PathLike[str]) -> Path:
        raise NotImplementedError


def test_an_editable_install_holds_the_modules_under_the_directory_it_was_installed_from() -> None:
    # pip install -e: the file list names a path hook, not the modules.
    here = Path(json.__file__).resolve().parent  # any imported module's directory
    assert _editable_holds(_Installed({"url": here.as_uri(), "dir_info": {"editable": True}}), "json")
    assert not _editable_holds(_Installed({"url": here.as_uri(), "dir_info": {}}), "json")
    assert not _editable_holds(_Installed({"url": (here / "x").as_uri(), "dir_info": {"editable": True}}),
                               "json")
    assert not _editable_holds(_Installed({"url": "https://example.invalid/p.tar.gz"}), "json")
    assert not _editable_holds(_Installed({"dir_info": {"editable": True}}), "json")


def test_our_own_adapter_is_found_without_the_scan_from_any_working_directory(tmp_path: Path) -> None:
    # Away from the repository (no crashmatrix.egg-info beside the working directory), an editable
    # install's metadata lists no module: without the editable check every `run` and `repro`
    # there paid the full scan (0.2 to 0.5 s). The scan is made to fail here, so only the fast
    # path can name the distribution.
    code = ("import importlib.metadata as m\n"
            "def refused(): raise RuntimeError('scanned')\n"
            "m.packages_distributions = refused\n"
            "import crashmatrix.harness.adapters.durable\n"
            "from crashmatrix.harness.adapters.identity import _distribution\n"
            "print(_distribution('crashmatrix.harness.adapters.durable'))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=True)
    assert proc.stdout.strip() == f"crashmatrix {importlib.metadata.version('crashmatrix')}"
