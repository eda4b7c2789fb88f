"""A scenario's Python check hook (`expect.check = "module:function"`): found, imported, called."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import io
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

# check(workspace, transcript) -> the violations it finds, as messages (empty: the world is right)
CheckHook = Callable[[Mapping[str, str], Any], Iterable[str]]

_loaded: dict[Path, ModuleType] = {}  # a hook module beside a scenario, by its file
# Cases are judged on several threads: loading a module, and a hook's run with stdout redirected
# (process-wide), happen one at a time.
_lock = threading.RLock()


def _beside(folder: Path, module_name: str) -> Path | None:
    """The file of `module_name` in the scenario's folder (`a.b` is `a/b.py` or `a/b/__init__.py`)."""
    base = folder.joinpath(*module_name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module(module_name: str, source: str) -> ModuleType:
    """The module a hook names: the file beside the scenario when there is one, loaded under a
    name of its own (two scenario folders may each hold a `checks.py`; Python's module cache
    would hand the second the first's), else an importable module (the current directory first)."""
    folder = Path(source).resolve().parent
    path = _beside(folder, module_name)
    if path is None:
        here = str(Path.cwd())
        added = here not in sys.path
        if added:
            sys.path.insert(0, here)
        try:
            return importlib.import_module(module_name)
        finally:
            if added:
                sys.path.remove(here)
    with _lock:
        if path not in _loaded:
            unique = f"crashmatrix_check_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
            spec = importlib.util.spec_from_file_location(unique, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            sys.path.insert(0, str(folder))  # its own imports of neighbours
            try:
                spec.loader.exec_module(module)
            finally:
                sys.path.remove(str(folder))
            _loaded[path] = module
        return _loaded[path]


def load_check(ref: str, source: str) -> CheckHook:
    """The function `module:function` names, found beside the scenario file `source` (then on
    the import path, the current directory first). Raises ImportError, AttributeError or
    TypeError, whose message says which."""
    module_name, _, attr = ref.partition(":")
    module = _module(module_name, source)
    fn = getattr(module, attr, None)
    if fn is None:
        raise AttributeError(f"module {module_name!r} ({module.__file__}) has no attribute {attr!r}")
    if not callable(fn):
        raise TypeError(f"{ref} is not callable")
    hook: CheckHook = fn
    return hook


class HookFailed(Exception):
    """The hook itself failed (raised, exited, or returned something that is no list of messages)."""


def run_check(ref: str, source: str, workspace: Mapping[str, str], transcript: Any) -> list[str]:
    """The hook's messages. It gets a read-only copy of the workspace (the evidence must show the
    world, not what a hook did to it); what it prints is kept from the harness's own output; a
    hook that raises, even SystemExit, or returns a string, a mapping or a non-iterable is
    HookFailed: it never ends the harness, and a string is not N one-letter violations."""
    try:
        with _lock, contextlib.redirect_stdout(io.StringIO()):
            found = load_check(ref, source)(MappingProxyType(dict(workspace)), transcript)
            if found is None:
                return []
            if isinstance(found, str | bytes | Mapping) or not isinstance(found, Iterable):
                raise HookFailed(f"returned {type(found).__name__}, not an iterable of messages")
            return [str(m) for m in found]
    except HookFailed:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the user's code: SystemExit included
        raise HookFailed(f"raised {type(exc).__name__}: {exc}") from None
