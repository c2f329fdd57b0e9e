"""The layout shows the architecture: one package per concern, each importing only the
packages below it (never one above, never in a loop), read from the code's own imports."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ltr_toolkit"

#: lowest first; a package may import only packages of a lower line (or its own modules)
LAYERS = [
    ("__init__", "errors", "versions"),  # __init__: the root package, __version__ only
    ("io",),
    ("data", "encoders", "rank"),
    ("models", "transport", "datasets"),
    ("distributed", "indexing", "clicks", "localnode"),  # localnode: the node the toolkit runs
    ("stores",),          # feature sets, parameters, models in the plugin
    ("query",),           # the first stage, clause budgets, request bodies
    ("features",),        # candidates and feature logging
    ("serving", "jobs"),  # reranked search and Serving; scheduled logging jobs
    ("evaluation",),
    ("pipeline",),
    ("cli",),
]


def _imports(path: Path):
    """(importing module, imported module, top-level?) for the package's own imports."""
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = list(rel.parts)
    here = ["ltr_toolkit", *parts[:-1]]
    module = ".".join(["ltr_toolkit", *(parts[:-1] if parts[-1] == "__init__" else parts)])
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            target = here[: len(here) - (node.level - 1)] + (node.module.split(".") if node.module else [])
        elif node.module and node.module.split(".")[0] == "ltr_toolkit":
            target = node.module.split(".")
        else:
            continue
        names = [".".join(target + [a.name]) for a in node.names
                 if _is_module(target[1:] + [a.name])] if not node.module or node.level else []
        for t in names or [".".join(target)]:
            yield module, t, id(node) in top


def _is_module(parts: list[str]) -> bool:
    path = PACKAGE.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _graph():
    return [edge for p in PACKAGE.rglob("*.py") for edge in _imports(p)]


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_package_imports_only_the_packages_below_it():
    level = {pkg: i for i, line in enumerate(LAYERS) for pkg in line}
    found = {p.name if p.is_dir() else p.stem for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or p.suffix == ".py"}
    assert found <= set(level), f"packages not in LAYERS: {sorted(found - set(level))}"
    upward = sorted({(a, b) for a, b, _ in _graph()
                     if _package(a) != _package(b) and level[_package(b)] >= level[_package(a)]})
    assert upward == [], upward


def test_no_module_imports_itself_back_through_others():
    """No cycle among the modules' top-level imports."""
    modules = {m.rsplit(".", 1)[0] if m.endswith(".__init__") else m for m, _, _ in _graph()}
    edges = defaultdict(set)
    for a, b, top in _graph():
        if top and b in modules and a != b:
            edges[a].add(b)
    state: dict = {}

    def visit(m, path):
        state[m] = 1
        for n in edges[m]:
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(n):] + [n])
                                     if n in path else f"{m} -> {n}")
            if n not in state:
                visit(n, path + [n])
        state[m] = 2
    for m in sorted(edges):
        if m not in state:
            visit(m, [m])


#: the most lines a function may take, from ``def`` to its last line, docstring included
SCREEN = 50


def _long_functions(limit: int = SCREEN) -> list[str]:
    """"path::name (N lines)" of every function (methods and nested ones included) longer
    than ``limit`` lines, counted from ``def`` (decorators left out) to its last line."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{where}::{node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_a_screen():
    long = _long_functions()
    assert long == [], f"functions longer than {SCREEN} lines: {long}"


def test_every_benchmark_has_its_results():
    """A module of benchmarks/ is a benchmark (``python -m benchmarks.NAME``) with its
    results in benchmarks/results/NAME*, or a helper named ``_NAME``."""
    bench = PACKAGE.parent / "benchmarks"
    results = {p.name for p in (bench / "results").iterdir()}
    lacking = [p.stem for p in sorted(bench.glob("*.py"))
               if not p.stem.startswith("_") and not any(r.startswith(p.stem) for r in results)]
    assert not lacking, f"benchmarks with no results file: {lacking}"
