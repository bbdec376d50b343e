"""The benchmark scripts: each one's usage names the script itself, and what a script asks of the plugin's modules
exists in them (a scratch copy instrumented against a local edit of a module is no benchmark of the checkout)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
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


def test_the_modules_a_bench_script_reads_off_the_package_are_loaded():
    """``phr.search``, ``b.phr.state``: a module read off the package ``_common.load_plugin`` gives, in a new process
    (the package's ``__init__`` imports none of its modules; ``bench/scaling.py`` failed on ``phr.state``)."""
    used = set()
    for script in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text())):
            if (isinstance(node, ast.Attribute) and (PLUGIN / f"{node.attr}.py").exists()
                    and (isinstance(node.value, ast.Name) and node.value.id == "phr"
                         or isinstance(node.value, ast.Attribute) and node.value.attr == "phr")):
                used.add(node.attr)
    assert {"search", "state", "store"} <= used, used
    # Modules the plugin imports only inside a function (numpy's side: the vector index) a script loads first itself.
    lazy = {alias.name for source in PLUGIN.glob("*.py") for fn in ast.walk(ast.parse(source.read_text()))
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) for node in ast.walk(fn)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and not node.module for alias in node.names}
    probe = (f"import sys; sys.path.insert(0, {str(BENCH)!r}); import _common; phr = _common.load_plugin(); "
             f"print(sorted(m for m in {sorted(used - lazy)!r} if not hasattr(phr, m)))")
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.strip() == "[]", ran
