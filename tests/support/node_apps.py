"""The example Node apps' npm packages, installed on demand: `npm ci` where node_modules is missing.

CI runs from a fresh clone, where no example has its node_modules (they are not committed): a
test module that hosts a Node app takes `installed(folder)` in a session fixture. `npm ci`
installs exactly the versions in package-lock.json; better-sqlite3 builds its native module when no
prebuilt binary is found (CI's case: they are on GitHub, out of reach), and the tests build it
unoptimised: SQLite's amalgamation at -O3 is most of the install (`npm ci` of langgraph_js_app:
61.0 s at -O3, 32.7 s at -O1, 23.9 s at -O0, one after another on a quiet 2-core machine), and a
hosted run does so few queries that `run --agent langgraph-js --scenario changelog-fast --states`
took the same 8.8-8.9 s on either build.
Without node or npm the caller skips, except in CI (`CI` set), where it fails.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

NPM_CI_TIMEOUT_S = 900.0  # a native build on a slow, shared machine; more means a hang
# Files whose absence means an install is missing or broken (npm 11 may skip install scripts:
# better-sqlite3's compiled module is then missing and every host dies at its first require).
MARKERS = {"better-sqlite3": Path("node_modules/better-sqlite3/build/Release/better_sqlite3.node")}


# The example app each Node integration hosts by default, for a test that runs it by agent name
# (and so must install it first, whichever test xdist happened to run before).
EXAMPLES = {"langgraph-js": "langgraph_js_app", "openai-agents-js": "openai_agents_js_app"}


def missing_tools() -> str | None:
    """Why Node apps cannot run here (None: node and npm are on PATH)."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (CI installs the Debian packages nodejs and npm)"
    return None


def _complete(folder: Path) -> bool:
    if not (folder / "node_modules").is_dir():
        return False
    lock = (folder / "package-lock.json").read_text(encoding="utf-8")
    return all((folder / marker).exists() for name, marker in MARKERS.items()
               if f'"node_modules/{name}"' in lock)


def installed(folder: Path) -> None:
    """Run `npm ci` in `folder` unless its node_modules is complete; RuntimeError with npm's
    output when the install fails. Under a lock: each pytest-xdist worker has its own session
    fixture, and two `npm ci` in one folder would delete each other's node_modules."""
    if _complete(folder):
        return
    with (folder / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        _install(folder)


def _install(folder: Path) -> None:
    if _complete(folder):
        return  # another worker installed it while this one waited
    # CFLAGS and CXXFLAGS come last on node-gyp's compiler lines: -O0 overrides binding.gyp's -O3.
    env = {**os.environ, "npm_config_audit": "false", "npm_config_fund": "false",
           "npm_config_update_notifier": "false", "CFLAGS": "-O0", "CXXFLAGS": "-O0"}
    done = subprocess.run(["npm", "ci"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=NPM_CI_TIMEOUT_S, check=False)
    if done.returncode != 0 or not _complete(folder):
        raise RuntimeError(f"npm ci in {folder} failed (exit {done.returncode}):\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def ready(folder: Path) -> Path:
    """`folder`'s npm packages installed, for a test's fixture: skipped without node and npm,
    except in CI (`CI` set), where that fails."""
    import pytest  # noqa: PLC0415 - only a test's fixture calls this

    why = missing_tools()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    installed(folder)
    return folder
