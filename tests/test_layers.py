"""The package's layers, checked from its source: every import of every
module (module level and inside functions) goes down the stack, never up,
and no modules import each other in a circle.  ``import pyarena`` stays
light.

    errors, _format -> _native -> memory -> graph -> planning -> runtime
        -> importers -> cli

The package root (``pyarena/__init__.py``, ``__main__.py``) and
``pyarena/onnxruntime.py`` (onnxruntime's API over the importers) are the
facades above every layer.
"""
import ast
import pathlib
import subprocess
import sys

import pytest

import pyarena

PKG = pathlib.Path(pyarena.__file__).resolve().parent

LAYERS = ["errors", "_format", "_native", "memory", "graph", "planning", "runtime",
          "importers", "cli"]
FACADES = ("__main__", "onnxruntime")
RANK = {"errors": 0, "_format": 0, "_native": 1, "memory": 2, "graph": 3, "planning": 4,
        "runtime": 5, "importers": 6, "cli": 7}


def module_name(path):
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module):
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in FACADES:
        return None          # a facade
    return parts[1]


def imports_of(path, text=None):
    """(line, absolute module) for every import statement in the file (or
    in ``text`` read as if it were that file)."""
    mod = module_name(path)
    pkg = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = []
    tree = ast.parse(path.read_text() if text is None else text, str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            out.append((node.lineno, target))
            for a in node.names:    # "from . import x" may name a submodule
                out.append((node.lineno, f"{target}.{a.name}"))
    return [(ln, m) for ln, m in out if m == "pyarena" or m.startswith("pyarena.")]


MODULES = {module_name(p): p for p in PKG.rglob("*.py")}


def known(name):
    """The module ``name`` refers to (an attribute import resolves to its module)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def test_every_module_belongs_to_a_layer():
    stray = [m for m in MODULES if layer_of(m) is not None and layer_of(m) not in RANK]
    assert not stray, f"modules outside the layers {LAYERS}: {stray}"


def test_no_import_goes_up_a_layer():
    upward = []
    for mod, path in MODULES.items():
        src = layer_of(mod)
        if src is None:
            continue
        for line, target in imports_of(path):
            dst = layer_of(known(target))
            if dst is not None and RANK[dst] > RANK[src]:
                upward.append(f"{path.relative_to(PKG.parent)}:{line} ({src}) imports "
                              f"{target} ({dst})")
    assert not upward, "imports that go up a layer:\n" + "\n".join(upward)


def test_no_import_cycles():
    graph = {m: set() for m in MODULES}
    for mod, path in MODULES.items():
        if layer_of(mod) is None:
            continue
        for _, target in imports_of(path):
            t = known(target)
            if t and t != mod and layer_of(t) is not None and not mod.startswith(t + "."):
                graph[mod].add(t)     # a package's own __init__ is not a cycle
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_an_upward_import():
    """The walker itself: a lazy import of the runtime inside a function of
    a planning module is found and ranked above planning."""
    path = PKG / "planning" / "result.py"
    text = path.read_text() + "\n\ndef _x():\n    from ..runtime import kernels\n"
    found = [t for _, t in imports_of(path, text)]
    assert "pyarena.runtime.kernels" in found
    assert "pyarena.runtime.kernels" not in [t for _, t in imports_of(path)]
    assert RANK[layer_of(known("pyarena.runtime.kernels"))] > RANK["planning"]


@pytest.mark.parametrize("code, absent", [
    ("import pyarena", ["pyarena.runtime", "pyarena.runtime.kernels", "pyarena.importers",
                        "pyarena.cli", "pyarena.onnxruntime", "onnx", "tflite",
                        "matplotlib", "onnxruntime"]),
    ("from pyarena.planning import plan", ["pyarena.runtime.kernels", "pyarena.importers"]),
])
def test_import_stays_light(code, absent):
    probe = f"{code}\nimport sys\nprint([m for m in {absent!r} if m in sys.modules])"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", f"{code!r} loaded {r.stdout.strip()}"


def test_top_level_names_keep_working():
    for name in ["Arena", "Pool", "Policy", "numpy_allocator", "Graph", "Plan", "plan",
                 "validate", "Executor", "load_model", "get_include", "get_library",
                 "PyArenaError", "OutOfMemoryError", "GraphError", "ModelImportError",
                 "UnsupportedOpError", "PlanValidationError", "PlanInfeasibleError",
                 "register_rule", "plan_intervals", "load_intervals_csv"]:
        assert getattr(pyarena, name) is not None, name
    assert callable(pyarena.plan) and callable(pyarena.validate)
    assert set(pyarena.__all__) <= set(dir(pyarena))


#: each file one idea: a module past this many lines is split by job
MAX_FILE_LINES = 700
#: ... and a function past this many lines into steps
MAX_FUNCTION_LINES = 80
#: ... and a class past this many lines into parts
MAX_CLASS_LINES = 300


def test_modules_and_functions_stay_small():
    """No module of the package over MAX_FILE_LINES lines, no function or
    method over MAX_FUNCTION_LINES, no class over MAX_CLASS_LINES
    (decorators not counted)."""
    too_long = []
    for path in sorted(PKG.rglob("*.py")):
        src = path.read_text()
        lines = src.count("\n")
        if lines > MAX_FILE_LINES:
            too_long.append(f"{path.relative_to(PKG)}: {lines} lines")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(PKG)}:{node.lineno} "
                                    f"{node.name}(): {n} lines")
            elif isinstance(node, ast.ClassDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_CLASS_LINES:
                    too_long.append(f"{path.relative_to(PKG)}:{node.lineno} "
                                    f"class {node.name}: {n} lines")
    assert not too_long, too_long
