"""What an adapter for a Node host shares: the `node` command line, the app as `FILE:EXPORT`, no zygote.

A Node host (`integrations/*_js/host.mjs`, on `clients/js/host-runtime.js`) takes the same
commands as a Python host (`run`, `recover`, `describe`) and `--app FILE:EXPORT`: the user's
module file and the export that builds the app. FILE is made absolute against the directory
crashmatrix runs in, so an incarnation (which runs in the workspace) finds it; the host loads
the framework from that file's own project (its node_modules), never from crashmatrix's.

Loading the framework is most of a Node incarnation's cost (about 0.6 s of CPU; Node 20 keeps no
compiled code between processes), so a host's `recover` reads its session first and, when there
is nothing to resume, ends as the framework's path would, without loading it
(docs/frameworks.md, "Node start cost"). `CHECK_FIRST_ENV=0` makes every host load it first.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from crashmatrix.harness.adapters.interface import PythonEntry
from crashmatrix.integrations.hosting import HostedAdapter

# The host's ESM loader resolves the app's packages from the app's folder with
# `import.meta.resolve(specifier, parent)`, which Node 20 offers behind this flag (a host started
# without it falls back to the packages' CommonJS entries, found from the same folder).
NODE_FLAGS = ("--experimental-import-meta-resolve",)
CHECK_FIRST_ENV = "CRASHMATRIX_NODE_CHECK_FIRST"  # "0": load the framework before reading the session


def node_program(host: Path) -> tuple[str, ...]:
    """`program` for a Node host: `node FLAGS HOST` (node as found on PATH now, when it is)."""
    return (shutil.which("node") or "node", *NODE_FLAGS, str(host))


def app_file(app: str) -> Path:
    """The file of `FILE:EXPORT`, absolute (ValueError for a reference without an export)."""
    file, sep, export = app.rpartition(":")
    if not sep or not file or not export:
        raise ValueError(f"app {app!r}: expected FILE:EXPORT, e.g. ./src/graph.mjs:build")
    return Path(os.getcwd(), file).resolve()


def absolute_ref(ref: str) -> str:
    """`FILE:EXPORT` with FILE made absolute (as it was given when it has no export: the host
    refuses it with a usage error, which preflight reports)."""
    try:
        return f"{app_file(ref)}:{ref.rpartition(':')[2]}"
    except ValueError:
        return ref


def node_package_versions(app: str, *packages: str) -> str:
    """`package version` of each npm package as the app's own project has it (its node_modules,
    found upward from the app's file, as Node resolves it), joined; "not installed" for one
    that is not there."""
    start = app_file(app).parent
    found = []
    for package in packages:
        version = None
        for folder in (start, *start.parents):
            manifest = folder / "node_modules" / package / "package.json"
            if manifest.is_file():
                try:
                    version = str(json.loads(manifest.read_text(encoding="utf-8")).get("version"))
                except (OSError, ValueError):
                    version = "unreadable"
                break
        found.append(f"{package} {version or 'not installed'}")
    return ", ".join(found)


class NodeHostedAdapter(HostedAdapter):
    """A HostedAdapter whose host is a Node program: every incarnation is a fresh `node`
    process (no zygote: Node cannot be forked from Python), and the app is `FILE:EXPORT`."""

    preload = ()

    @property
    def python(self) -> PythonEntry | None:
        return None  # nothing for the zygote to import

    def _flags(self) -> list[str]:
        file = app_file(self.app)
        return ["--app", f"{file}:{self.app.rpartition(':')[2]}"]
