"""The benchmark scripts: each one's usage names the script itself, and what a script asks of the plugin's modules
exists in them (a scratch copy instrumented against a local edit of a module is no benchmark of the checkout)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
PLUGIN = BENCH.parent


def test_each_bench_scripts_usage_names_itself():
    wrong = {}
    for script in sorted(BENCH.glob("*.py")):
        named = set(re.findall(r"python bench/(\w+\.py)", ast.get_docstring(ast.parse(script.read_text())) or ""))
        if named and script.name not in named:
            wrong[script.name] = sorted(named)
    assert not wrong, wrong


def test_what_a_bench_script_reads_of_a_plugin_module_is_there():
    """``importlib.import_module(f"{package}.store")`` bound to a name, then ``name.ATTR``: ATTR is defined in store.py."""
    missing = []
    for script in sorted(BENCH.glob("*.py")):
        tree = ast.parse(script.read_text())
        modules: dict[str, str] = {}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", "") == "import_module"
                    and node.value.args and isinstance(node.value.args[0], ast.JoinedStr)):
                tail = node.value.args[0].values[-1]
                if isinstance(tail, ast.Constant) and str(tail.value).startswith("."):
                    modules[node.targets[0].id] = str(tail.value)[1:]
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
                source = PLUGIN / f"{modules[node.value.id]}.py"
                if source.exists() and node.attr not in _top_level_names(source):
                    missing.append(f"{script.name}: {modules[node.value.id]}.{node.attr}")
    assert not missing, sorted(set(missing))


def _top_level_names(source: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names
