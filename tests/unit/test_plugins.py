"""Extension points: a third party's adapter or fault kind is found exactly as the built-ins are."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.adapters.interface import Capability
from crashmatrix.harness.adapters.registry import ADAPTERS
from crashmatrix.harness.enumeration import single_crash_cases
from crashmatrix.harness.faults.interface import at_request
from crashmatrix.harness.faults.registry import FAULTS, faults_for
from crashmatrix.harness.plugins import ExtensionPoint, PluginError, UnknownPlugin

PLUGIN = '''
from crashmatrix.harness.adapters.interface import Capability


class Snap:
    name = "snap"
    requires = frozenset({Capability.KILL})

    def enumerated_at(self, kind, label):
        return kind == "effect.after"

    def apply(self, adapter, spec):
        pass


class NeedsMore(Snap):
    name = "needs-more"
    requires = frozenset({Capability.KILL, "time-travel"})


SNAP = Snap()
NEEDS_MORE = NeedsMore()
MISNAMED = Snap()
'''


def _distribution(root: Path, group: str, entries: dict[str, str]) -> Path:
    """An installed distribution as importlib.metadata finds it: a dist-info folder on sys.path."""
    info = root / "thirdparty-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thirdparty\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}")
    (root / "thirdparty_faults.py").write_text(PLUGIN)
    return root


@pytest.fixture
def plugin_faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(_distribution(tmp_path, "crashmatrix.faults", {
        "snap": "thirdparty_faults:SNAP", "needs-more": "thirdparty_faults:NEEDS_MORE"})))


def test_the_builtins_are_registered_by_entry_point() -> None:
    assert {"kill", "torn"} <= set(FAULTS.names())
    assert {"durable-agent", "messages-only"} <= set(ADAPTERS.names())
    assert ADAPTERS.get("durable-agent").capabilities == set(Capability)


@pytest.mark.usefixtures("plugin_faults")
def test_a_third_party_fault_is_enumerated_like_a_builtin() -> None:
    assert FAULTS.get("snap").name == "snap"
    durable = ADAPTERS.get("durable-agent")
    # Sorted by name; a fault needing a capability the adapter lacks is never given to it.
    at_events = [f.name for f in faults_for(durable) if at_request(f) is None]
    assert at_events == ["kill", "second", "snap", "torn"]
    cases = single_crash_cases("s", ["effect.after:append_note", "commit.written:x"], faults_for(durable))
    assert [c.case_id for c in cases] == ["s/01:effect.after:append_note/kill",
                                          "s/01:effect.after:append_note/snap",
                                          "s/02:commit.written:x/kill", "s/02:commit.written:x/torn"]


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownPlugin, match=r"unknown fault 'zap' \(known: .*kill.*torn"):
        FAULTS.get("zap")


def test_a_broken_or_misnamed_plugin_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(_distribution(tmp_path, "test.group", {
        "gone": "thirdparty_nowhere:X", "wrong": "thirdparty_faults:MISNAMED", "Bad_Name": "x:y"})))
    point: ExtensionPoint[object] = ExtensionPoint("test.group", "widget")
    with pytest.raises(PluginError, match=r"widget 'gone' \(thirdparty_nowhere:X\) failed to load"):
        point.get("gone")
    with pytest.raises(PluginError, match=r"names itself 'snap'; its `name` must be 'wrong'"):
        point.get("wrong")
    with pytest.raises(PluginError, match="names must match"):
        point.get("Bad_Name")


def test_line_coverage_measures_the_agents_own_package() -> None:
    from crashmatrix.harness.adapters.durable import ENTRY  # noqa: PLC0415
    from crashmatrix.harness.adapters.interface import PythonEntry  # noqa: PLC0415
    from crashmatrix.harness.adapters.mutant import MutantAdapter  # noqa: PLC0415

    # A user's agent: its top-level package, not ours.
    assert PythonEntry("mypkg.agent.main", "mypkg.agent.main:run").measured == "mypkg"
    named = PythonEntry("mypkg.agent", "mypkg.agent:run", coverage_source="mypkg.agent")
    assert named.measured == "mypkg.agent"
    # Ours lives inside crashmatrix: the agent package only, for the mutants too.
    assert ENTRY.measured == "crashmatrix.agent"
    assert MutantAdapter.python is not None
    assert MutantAdapter.python.measured == "crashmatrix.agent"
