"""A scenario's Python check hook (`expect.check = "module:function"`), found and imported."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

# check(workspace, transcript) -> the violations it finds, as messages (empty: the world is right)
CheckHook = Callable[[Mapping[str, str], Any], Iterable[str]]


def load_check(ref: str, source: str) -> CheckHook:
    """The function `module:function` names, imported with the scenario file's folder (then the
    current directory) first on sys.path: a hook lives beside the scenarios that use it. Raises
    ImportError, AttributeError or TypeError, whose message says which."""
    module_name, _, attr = ref.partition(":")
    folders = [str(Path(source).resolve().parent), str(Path.cwd())]
    added = [f for f in folders if f not in sys.path]
    sys.path[:0] = added
    try:
        module = importlib.import_module(module_name)
    finally:
        for f in added:
            sys.path.remove(f)
    fn = getattr(module, attr, None)
    if fn is None:
        raise AttributeError(f"module {module_name!r} ({module.__file__}) has no attribute {attr!r}")
    if not callable(fn):
        raise TypeError(f"{ref} is not callable")
    hook: CheckHook = fn
    return hook
