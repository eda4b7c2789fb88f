"""Finds and loads scenario files: single files, directories, the built-ins, and names."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from crashmatrix.scenarios.arrivals import named as arrival_named
from crashmatrix.scenarios.errors import ScenarioError
from crashmatrix.scenarios.model import Scenario
from crashmatrix.scenarios.schema import parse_scenario

_TOML_POS = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")


def builtin_dir() -> Path:
    """The directory holding the built-in scenario files (package data)."""
    return Path(str(resources.files("crashmatrix.scenarios") / "builtin"))


def load_file(path: str | Path) -> Scenario:
    """Load and validate one scenario file; its name defaults to the file's stem."""
    p = Path(path)
    source = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                            path=source) from None
    except OSError as exc:
        raise ScenarioError(f"cannot read: {exc.strerror or exc}", path=source) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        m = _TOML_POS.search(message)
        line = column = None
        if m:
            line, column = int(m.group(1)), int(m.group(2))
            message = message[: m.start()]
        raise ScenarioError(f"invalid TOML: {message}", path=source, line=line,
                            column=column) from None
    return parse_scenario(data, source=source, default_name=p.stem, text=text)


def load_dir(path: str | Path) -> dict[str, Scenario]:
    """Every `*.toml` in a directory (not recursive), by scenario name."""
    d = Path(path)
    if not d.is_dir():
        raise ScenarioError("not a directory", path=str(path))
    found: dict[str, Scenario] = {}
    for f in sorted(d.glob("*.toml")):
        s = load_file(f)
        if s.name in found:
            raise ScenarioError(f"duplicate scenario name {s.name!r} (also in "
                                f"{found[s.name].source})", path=str(f), field="name")
        found[s.name] = s
    return found


def is_builtin(scenario: Scenario) -> bool:
    """Whether the scenario is one of the built-ins (shipped with crashmatrix, not the user's)."""
    return Path(scenario.source).resolve().parent == builtin_dir().resolve()


def load_builtin() -> dict[str, Scenario]:
    return load_dir(builtin_dir())


def load_all(extra_dirs: Iterable[str | Path] = ()) -> dict[str, Scenario]:
    """Built-ins plus user directories; a user scenario may not reuse a name already loaded,
    because a silently shadowed scenario would make results ambiguous."""
    known = load_builtin()
    for d in extra_dirs:
        for name, s in load_dir(d).items():
            if name in known:
                raise ScenarioError(f"scenario name {name!r} is already taken by "
                                    f"{known[name].source}", path=s.source, field="name")
            known[name] = s
    return known


def resolve(names: Iterable[str], extra_dirs: Iterable[str | Path] = ()) -> list[Scenario]:
    """The named scenarios in the order given (duplicates dropped); no names means all."""
    known = load_all(extra_dirs)
    wanted = list(dict.fromkeys(names))
    if not wanted:
        return [known[n] for n in sorted(known)]
    for n in wanted:  # an arrival-timing variant (scenarios/arrivals.py) is rebuilt from its name
        found = None if n in known else arrival_named(n, known)
        if found is not None:
            known[n] = found
    unknown = [n for n in wanted if n not in known]
    if unknown:
        listed = ", ".join(sorted(known))
        raise ScenarioError(f"unknown scenario {unknown[0]!r}; known: {listed}")
    return [known[n] for n in wanted]
