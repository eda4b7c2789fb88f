"""The layers hold: no import cycle, records at the bottom, renderers on records only, one CLI on top.

Read from the source with `ast` (every import statement, including those inside functions and
under TYPE_CHECKING: a lazy import is still a dependency), so a new module is covered the moment
it exists. `from pkg import name` counts as an import of `pkg.name` when that is a module, else of
`pkg`; importing `pkg.sub` is not counted as importing `pkg/__init__` (grimp's convention).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "crashmatrix"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    # The package links the top-level folders in; os.walk-style traversal through the links.
    found: dict[str, Path] = {}
    stack = [PACKAGE]
    while stack:
        folder = stack.pop()
        for entry in sorted(folder.iterdir()):
            if entry.is_dir() and (entry / "__init__.py").exists():
                stack.append(entry)
            elif entry.suffix == ".py":
                found[module_name(entry)] = entry
    return found


def imports_of(name: str, path: Path, known: Iterable[str]) -> set[str]:
    known = set(known)
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in known else target)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "LAZY"
                                                  for t in node.targets):
            # Modules named to be imported when used (the command line's LAZY commands): a
            # dependency all the same, which the layers and the cycle check must see.
            out.update(c.value for c in ast.walk(node.value)
                       if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in known)
    return {m for m in out if m.split(".")[0] == "crashmatrix" and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(name, path, mods) for name, path in mods.items()}


def cycles(g: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), or self-loops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in g:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def _in(module: str, prefixes: Iterable[str]) -> bool:
    """`prefixes` name packages (a module and everything below it); a trailing `=` names exactly
    one module."""
    return any(module == p.rstrip("=") if p.endswith("=") else module == p or module.startswith(p + ".")
               for p in prefixes)


C = "crashmatrix."
RECORDS = C + "harness.records"
# Who may import what, by layer (first matching layer wins). Anything not listed under a layer's
# allowed prefixes is a layer violation.
LAYERS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("records: the data that flows, at the bottom", (RECORDS,), (RECORDS,)),
    ("the agent: our reference agent knows nothing of the harness", (C + "agent",), (C + "agent",)),
    ("scenarios: data and its schema", (C + "scenarios",), (C + "scenarios",)),
    ("fakes: test doubles read scenarios only", (C + "fakes",), (C + "fakes", C + "scenarios")),
    ("renderers import only records", (C + "reports",), (C + "reports", RECORDS)),
    ("plugins: the extension-point mechanism", (C + "harness.plugins",), (RECORDS,)),
    ("adapter interface", (C + "harness.adapters.interface",), (RECORDS,)),
    ("adapters", (C + "harness.adapters",),
     (C + "harness.adapters", RECORDS, C + "harness.plugins", C + "agent", C + "harness.mutants",
      C + "scenarios")),
    ("mutants: patches on our agent, and their launcher", (C + "harness.mutants",),
     (C + "harness.mutants", C + "agent")),
    ("fault kinds", (C + "harness.faults",),
     (C + "harness.faults", C + "harness.adapters.interface", RECORDS, C + "harness.plugins")),
    ("verification: pure checks", (C + "harness.verify",),
     (C + "harness.verify", RECORDS, C + "scenarios")),
    ("the pure core: enumeration and verdicts", (C + "harness.enumeration", C + "harness.evaluate"),
     (RECORDS, C + "harness.verify", C + "harness.faults.interface", C + "scenarios")),
    ("execution: processes, files, clocks", (C + "harness.execution",),
     (C + "harness.execution", RECORDS, C + "harness.adapters", C + "harness.faults",
      C + "harness.enumeration", C + "harness.evaluate", C + "harness.mutants", C + "scenarios",
      C + "fakes")),
    ("exploration", (C + "harness.explore",),
     (C + "harness.explore", RECORDS, C + "harness.adapters", C + "harness.faults",
      C + "harness.enumeration", C + "harness.evaluate", C + "harness.execution", C + "harness.verify",
      C + "harness.mutants", C + "harness.plugins", C + "scenarios", C + "fakes")),
    ("the probe client for any agent", (C + "probe",), (C + "agent.probe",)),
    # A framework integration is an adapter plus the host that runs the user's app: it may use
    # what any third-party adapter may (the interface, the records, the probe client), no more.
    ("framework integrations: adapters and hosts for apps on a framework", (C + "integrations",),
     (C + "integrations", C + "harness.adapters.interface", RECORDS, C + "probe", C + "agent.probe")),
    # harness.api is the CLI's `run` as a function (a user's test calls it): the same layer.
    ("the CLI: the only layer that imports execution and renderers",
     (C + "harness.cli", C + "harness.api", "crashmatrix=", C + "__main__="), ("crashmatrix",)),
    ("package docs", (C + "harness=",), ()),
]


def layer_of(module: str) -> tuple[str, tuple[str, ...]]:
    for name, members, allowed in LAYERS:
        if _in(module, members):
            return name, allowed
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS in {__file__}")


def violations(g: Mapping[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(g.items()):
        layer, allowed = layer_of(module)
        out += [f"{module} -> {t} ({layer})" for t in sorted(targets) if not _in(t, allowed)]
    return out


def test_the_graph_is_read_from_every_module() -> None:
    g = graph()
    assert {C + "agent.loop", C + "harness.records.case", C + "reports.html",
            C + "harness.cli.main"} <= set(g)
    assert C + "harness.records.case" in g[C + "harness.enumeration"]
    # A relative import and an import inside a function count too.
    assert C + "harness.execution.runner" in g[C + "harness.cli.pytest_plugin"]


def test_there_is_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_the_layers_hold() -> None:
    assert violations(graph()) == []


def test_a_module_outside_every_layer_is_named() -> None:
    with pytest.raises(AssertionError, match="belongs to no layer"):
        layer_of(C + "harness.newthing")


def test_renderers_import_no_execution_module() -> None:
    g = graph()
    reports = {m: t for m, t in g.items() if _in(m, [C + "reports"])}
    assert reports
    bad = [f"{m} -> {t}" for m, ts in reports.items() for t in ts
           if not _in(t, [RECORDS, C + "reports"])]
    assert bad == []


# The checkers themselves must be able to fail.
def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize(("module", "target"), [
    (C + "reports.html", C + "harness.execution.runner"),
    (C + "harness.records.case", C + "harness.faults.registry"),
    (C + "agent.loop", C + "harness.records.case"),
    (C + "harness.execution.matrix", C + "reports.write"),
    (C + "harness.mutants.catalogue", C + "harness.adapters.mutant"),
])
def test_a_layer_violation_is_named(module: str, target: str) -> None:
    assert violations({module: {target}}) == [f"{module} -> {target} ({layer_of(module)[0]})"]


def test_relative_imports_resolve(tmp_path: Path) -> None:
    pkg = tmp_path / "crashmatrix" / "harness"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import x\nfrom .y import z\n")
    known = {"crashmatrix.harness.x", "crashmatrix.harness.y"}
    assert imports_of("crashmatrix.harness", pkg / "__init__.py", known) == known
