"""Which distribution installed an adapter's module: the fast lookup by name agrees with the full scan."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import pytest

from crashmatrix.harness.adapters.identity import _distribution, _named_alike


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
