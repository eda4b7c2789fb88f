"""Installed as users install it: the wheel owns one import name, and the installed wheel works
beside a project that has its own `agent/` and `harness/` packages (the layout its users' agents
have)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY_DIR = ROOT / "tests" / "support" / "scenarios"


def _source_copy(dest: Path) -> Path:
    """The files git tracks (symlinks kept as links), so the build writes nothing into the checkout."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src, dst = ROOT / rel, dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, dst)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = _source_copy(tmp / "src")
    # No build isolation: the test extra brings setuptools, so building needs no network.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp / "dist"), str(src)], check=True, capture_output=True)
    (built,) = (tmp / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel's files installed into a folder of their own (the dependencies are the venv's)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--target", str(target), str(wheel)], check=True, capture_output=True)
    return target


def test_the_wheel_installs_crashmatrix_and_nothing_else(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"crashmatrix"}
    # The linked folders are real files in the wheel, with the built-in scenarios as data.
    for needed in ("crashmatrix/agent/loop.py", "crashmatrix/harness/records/case.py",
                   "crashmatrix/harness/faults/torn.py", "crashmatrix/scenarios/builtin/changelog.toml",
                   "crashmatrix/__main__.py"):
        assert needed in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    for line in ("[crashmatrix.adapters]", "durable-agent = crashmatrix.harness.adapters.durable:ADAPTER",
                 "[crashmatrix.faults]", "torn = crashmatrix.harness.faults.torn:TORN",
                 "[pytest11]", "[console_scripts]"):
        assert line in text


def _foreign_project(root: Path) -> Path:
    """A user's project whose own top-level packages would shadow generic names."""
    for pkg in ("agent", "harness", "scenarios", "reports", "fakes"):
        (root / pkg).mkdir(parents=True)
        (root / pkg / "__init__.py").write_text(
            f"raise ImportError('the project\\'s own {pkg} package was imported by crashmatrix')\n")
    return root


def _env(project: Path, installed: Path) -> dict[str, str]:
    # `python -m` puts the project first on sys.path, and PYTHONPATH does too, as in a project
    # that installs itself: any generic import name of ours would hit the user's package. The
    # installed wheel comes before the checkout's editable install.
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(installed)])}


def test_the_installed_wheel_is_what_runs(tmp_path: Path, installed: Path) -> None:
    project = _foreign_project(tmp_path / "project")
    proc = subprocess.run([sys.executable, "-c", "import crashmatrix.agent.cli as m; print(m.__file__)"],
                          cwd=project, env=_env(project, installed), capture_output=True, text=True,
                          check=True)
    assert Path(proc.stdout.strip()).is_relative_to(installed)


def test_run_works_from_a_project_with_its_own_agent_package(tmp_path: Path, installed: Path) -> None:
    project = _foreign_project(tmp_path / "project")
    out = tmp_path / "out"
    env = _env(project, installed)
    proc = subprocess.run([sys.executable, "-m", "crashmatrix", "run", "--scenario", "tiny",
                           "--scenarios", str(TINY_DIR), "--out", str(out), "--json"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["failed"] == 0
    assert summary["cases"] > 5


def test_the_plugin_works_from_a_project_with_its_own_agent_package(tmp_path: Path,
                                                                   installed: Path) -> None:
    project = _foreign_project(tmp_path / "project")
    env = _env(project, installed)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--crashmatrix", "--crashmatrix-scenario", "tiny",
                           "--crashmatrix-scenarios", str(TINY_DIR), "-q", "-k", "none or 02"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "INTERNALERROR" not in proc.stdout + proc.stderr
    assert " passed" in proc.stdout
