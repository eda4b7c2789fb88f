"""L5: a tool that leaves a mode-000 file or directory in the workspace is a fact the verdict shows,
not the harness's death. Run without the capability that lets root read anything (as a normal user
runs it): `setpriv` drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the harness."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bash_scenario import bash_then_append

pytestmark = pytest.mark.crash
NO_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


SCENARIOS = {
    "unreadable-file": ("a mode-000 file", "echo secret > unreadable; chmod 000 unreadable; echo prepared"),
    "unreadable-dir": ("a mode-000 directory",
                       "mkdir -p locked/inner; echo x > locked/inner/f; chmod 000 locked; echo prepared"),
}


def _dropped() -> str | None:
    if shutil.which("setpriv") is None:
        return "no setpriv(1)"
    probe = subprocess.run([*NO_OVERRIDE, "cat", "/proc/self/status"], capture_output=True, text=True,
                           check=False)
    if probe.returncode != 0:
        return f"setpriv: {probe.stderr.strip()}"
    return None


@pytest.mark.parametrize("options", [[], ["--keep"], ["--fault", "power"], ["--black-box"], ["--states"]],
                         ids=["kill", "keep", "power", "black-box", "states"])
def test_a_mode_000_file_or_directory_leaves_the_run_standing(tmp_path: Path, options: list[str]) -> None:
    why = _dropped()
    if why is not None:
        pytest.skip(f"cannot run the harness without its read-anything capability: {why}")
    folder = tmp_path / "scenarios"
    folder.mkdir()
    for name, (what, command) in SCENARIOS.items():
        (folder / f"{name}.toml").write_text(bash_then_append(what, command))
    out = tmp_path / "out"
    proc = subprocess.run(
        [*NO_OVERRIDE, sys.executable, "-m", "crashmatrix", "run", "--scenarios", str(folder),
         *[a for name in SCENARIOS for a in ("--scenario", name)], "--out", str(out), *options],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["scenario"] for r in records} == set(SCENARIOS)
    assert all(r["verdict"] == "pass" for r in records)
