"""The package's layering, read from the source with `ast` (imports inside functions included).

core <- drafters <- decoding <- fixed_shape <- analysis <- ui, and nothing below a layer imports it; beside ui,
engine (the models in vLLM) sits on analysis and the command-line tools on engine, and none of the six layers
imports either.
No import cycle between modules, no module over 400 lines, and the decoding layers import without ipywidgets or
matplotlib.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

MAX_LINES = 400
PACKAGES = ("tree_spec", "mini_llm")
# layer -> the tree_spec layers it may import (itself included)
ALLOWED = {
    "core": {"core"},
    "drafters": {"core", "drafters"},
    "decoding": {"core", "drafters", "decoding"},
    "fixed_shape": {"core", "drafters", "decoding", "fixed_shape"},
    "analysis": {"core", "drafters", "decoding", "fixed_shape", "analysis"},
    "ui": {"core", "drafters", "decoding", "fixed_shape", "analysis", "ui"},
    "engine": {"core", "drafters", "decoding", "fixed_shape", "analysis", "engine"},
    "tools": {"core", "drafters", "decoding", "fixed_shape", "analysis", "engine", "tools"},
}
ON_TOP = {"analysis", "ui", "tools", "engine"}  # what modules outside the layers (mini_llm, tree_spec) never import
ENTRY_POINTS = {"tree_spec.__main__"}   # command-line entry points: nothing imports them


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """Every module `path` imports, absolute, anywhere in the file (functions included; not the type-only imports
    under `if TYPE_CHECKING:`, which never run)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    type_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and ast.unparse(node.test).endswith(
        "TYPE_CHECKING") for n in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return found


MODULES = _modules()
GRAPH = {name: {m for m in _imports(name, path) if m in MODULES and m != name} for name, path in MODULES.items()}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "tree_spec" and parts[1] in ALLOWED else None


def _against_layering(graph: dict[str, set[str]]) -> list[str]:
    """The imports of `graph` (module -> the modules it imports) that the layering forbids, as "a -> b"."""
    wrong = []
    for name, imported in graph.items():
        for target in imported:
            layer, target_layer = _layer(name), _layer(target)
            if target_layer is None:
                continue
            if layer is None and name not in ENTRY_POINTS and target_layer in ON_TOP:
                wrong.append(f"{name} -> {target}")
            elif layer is not None and target_layer not in ALLOWED[layer]:
                wrong.append(f"{name} -> {target}")
    return sorted(wrong)


def test_every_layer_imports_only_the_layers_below_it() -> None:
    wrong = _against_layering(GRAPH)
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


def test_no_layer_below_the_tools_and_the_engine_may_import_them() -> None:
    below = ["core", "drafters", "decoding", "fixed_shape", "analysis", "ui"]
    forbidden = [(f"tree_spec.{layer}.m", f"tree_spec.{top}.x") for layer in below for top in ("tools", "engine")]
    forbidden += [("tree_spec", "tree_spec.tools.bench"), ("mini_llm.model", "tree_spec.engine.runner"),
                  ("tree_spec.engine.m", "tree_spec.tools.bench")]
    for name, target in forbidden:
        assert _against_layering({name: {target}}) == [f"{name} -> {target}"]
    assert _against_layering({"tree_spec.tools.bench": {"tree_spec.analysis.curve", "tree_spec.engine.peer"},
                              "tree_spec.engine.reconcile": {"tree_spec.analysis.trace"},
                              "tree_spec.__main__": {"tree_spec.tools.args"}}) == []


def test_the_layering_rules_see_imports_inside_functions(tmp_path: Path) -> None:
    source = tmp_path / "late.py"
    source.write_text("def run():\n    from ..drafters.ngram import NGramDrafter\n    return NGramDrafter\n")
    assert "tree_spec.drafters.ngram" in _imports("tree_spec.tools.late", source)


def test_no_import_cycle() -> None:
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(GRAPH):
        if node not in state and (cycle := visit(node)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def test_no_module_over_the_line_limit() -> None:
    judgekit = {_module_name(p): p for p in sorted((REPO / "practice" / "judgekit").rglob("*.py"))}
    long = {name: n for name, path in {**MODULES, **judgekit}.items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_decoding_layers_import_without_widgets_or_plots() -> None:
    code = ("import sys, tree_spec.core.contracts, tree_spec.core.growth, tree_spec.drafters.base, "
            "tree_spec.decoding.chain, tree_spec.decoding.tree, tree_spec.decoding.dynamic, "
            "tree_spec.decoding.lookahead, tree_spec.decoding.batch\n"
            "import pkgutil, importlib\n"
            "for pkg in ('core', 'drafters', 'decoding'):\n"
            "    for m in pkgutil.iter_modules([f'tree_spec/{pkg}']):\n"
            "        importlib.import_module(f'tree_spec.{pkg}.{m.name}')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('ipywidgets', 'matplotlib')))")
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
