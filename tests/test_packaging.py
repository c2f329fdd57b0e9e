"""Every third-party module the package (and the suite) imports is declared in
pyproject.toml, so a fresh virtual environment installed with the README's command has it.
The interpreter that runs the suite may have more packages than pyproject names: that is
how a missing `click` once crashed `ltr job run` on every fresh install while CI stayed
green."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

try:
    import tomllib
except ModuleNotFoundError:      # Python 3.10
    import tomli as tomllib


def _imported(folder: Path) -> dict[str, str]:
    """Top-level names of every absolute import under ``folder`` (function-level ones
    too) -> the first file:line that imports it."""
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def _third_party(found: dict[str, str], own: set[str]) -> dict[str, str]:
    return {m: where for m, where in found.items()
            if m not in sys.stdlib_module_names and m not in own}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(*extras: str) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    return {_norm(re.match(r"[A-Za-z0-9_.\-]+", r).group(0)) for r in reqs}


def _undeclared(modules: dict[str, str], declared: set[str]) -> list[str]:
    dists = md.packages_distributions()
    missing = []
    for module, where in sorted(modules.items()):
        names = {_norm(d) for d in dists.get(module, [module])}
        if not names & declared:
            missing.append(f"{module} ({where}; distribution {', '.join(sorted(names))})")
    return missing


def test_package_imports_are_declared():
    modules = _third_party(_imported(ROOT / "ltr_toolkit"), {"ltr_toolkit"})
    assert {"numpy", "typer", "rich", "opensearchpy", "xgboost"} <= set(modules)
    # matplotlib is optional (ltr evaluate --plot): the `plot` extra, and a one-line error;
    # dask too (ltr train --dask): the `dask` extra
    assert not _undeclared(modules, _declared("plot", "dask")), _undeclared(modules, _declared("plot", "dask"))


def test_no_standalone_click():
    """typer >= 0.29 vendors click and no longer installs it: importing it fails on a
    fresh install (and its ParameterSource is not typer's)."""
    modules = _imported(ROOT / "ltr_toolkit")
    assert "click" not in modules, modules.get("click")


def test_suite_and_benchmark_imports_are_declared():
    own = {"ltr_toolkit", "conftest", "benchmarks", "tests"} | \
        {p.stem for p in (ROOT / "tests").glob("*.py")}     # a test module's sibling
    tests = _third_party(_imported(ROOT / "tests"), own)
    assert not _undeclared(tests, _declared("test")), _undeclared(tests, _declared("test"))
    bench = _third_party(_imported(ROOT / "benchmarks"), own)
    assert not _undeclared(bench, _declared("bench", "test")), _undeclared(bench, _declared("bench", "test"))
