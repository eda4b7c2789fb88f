"""Which distribution installed an adapter's package: the fast lookup by name agrees with the full scan."""

from __future__ import annotations

import importlib.metadata

from crashmatrix.harness.adapters.identity import _distribution, _named_alike


def test_the_lookup_by_name_finds_only_a_distribution_the_full_scan_finds_too() -> None:
    scanned = importlib.metadata.packages_distributions()
    found = {top: _named_alike(top) for top in scanned}
    disagree = {top: (got, scanned[top]) for top, got in found.items() if got and got[0] not in scanned[top]}
    assert disagree == {}
    assert found["crashmatrix"] == ["crashmatrix"]
    # A package its distribution is not named after is left to the scan.
    assert found["_pytest"] == []
    assert _distribution("_pytest.main") == f"pytest {importlib.metadata.version('pytest')}"
    assert _distribution("crashmatrix.harness.adapters.durable") == \
        f"crashmatrix {importlib.metadata.version('crashmatrix')}"


def test_a_module_no_distribution_installed_has_none() -> None:
    assert _named_alike("no_such_package_anywhere") == []
    assert _distribution("no_such_package_anywhere.adapter") is None
